// What cclCommInitFromEnv reads: rank, size and the rendezvous address, from whichever launcher
// started the process. Precedence (first one found wins): cclrun's CCL_RANK/CCL_WORLD_SIZE, Open
// MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), MPICH/Hydra (PMI_RANK/PMI_SIZE, MPI_LOCALRANKID),
// Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID), torchrun (RANK/WORLD_SIZE/LOCAL_RANK).
// The address: CCL_COMM_ID=host:port, else MASTER_ADDR + MASTER_PORT. Rank 0 serves the
// rendezvous there (under torchrun, whose agent serves its own store there, see torch_store);
// cclrun may hand rank 0 an already bound listening socket in CCL_BOOTSTRAP_LISTEN_FD. The
// bootstrap secret: CCL_COMM_SECRET (32 hex digits), else all zeros (launchers other than cclrun
// have no way to share one).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/bootstrap/unique_id.h"

namespace ccl {

struct LauncherEnv {
  std::string launcher;  // "cclrun", "openmpi", "mpich", "slurm", "torchrun"
  int rank = -1;
  int nranks = -1;
  int local_rank = -1;  // -1 if the launcher does not say
  std::string address;  // "host:port"
  Secret secret{};
  int listen_fd = -1;  // CCL_BOOTSTRAP_LISTEN_FD, rank 0 only
  // Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True, no CCL_COMM_ID) MASTER_ADDR:MASTER_PORT is
  // the agent's TCPStore: rank 0 serves ccl's rendezvous elsewhere and publishes its unique id
  // there under this key prefix ("ccl/<TORCHELASTIC_RUN_ID>/<TORCHELASTIC_RESTART_COUNT>");
  // `address` is then the store's.
  bool torch_store = false;
  std::string torch_store_prefix;
};

using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// Reads the variables through `lookup` (getenv by default). Throws InvalidUsage with a message
// naming the variable to set when no launcher is recognised, the rank/size are malformed or out
// of range, or no rendezvous address is given.
LauncherEnv read_launcher_env(const EnvLookup& lookup);
LauncherEnv read_launcher_env();

}  // namespace ccl
