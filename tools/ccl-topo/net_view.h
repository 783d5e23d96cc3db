// ccl-topo's network views: --net, the network transports this host offers its peers on other
// hosts (each probe's answer and CCL_NET applied, core/comm/transport_choice.h), and --pairs, run
// under a launcher (cclrun, mpirun, srun, torchrun), the transport every pair of ranks chose.
#pragma once

#include <string>

namespace ccl::topo_tool {

// The text of --net. Never throws: a CCL_NET that cannot be met is part of the answer.
std::string render_network_transports();

// Makes a communicator of the launcher's ranks (cclCommInitFromEnv) and prints, on rank 0, the
// matrix of the transports chosen between every pair. Returns the exit status (1: the
// communicator could not be made, with the reason on stderr).
int print_pair_transports();

}  // namespace ccl::topo_tool
