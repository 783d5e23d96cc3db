// What ucx_availability() (ucx_transport.h) is made of, apart for tests: a probe that makes a
// UCP context and lists what it found, and the rule for taking ucx by default.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "transport/net_availability.h"

namespace ccl::transport::ucx {

// One UCX transport resource: "tcp" on "eth0", "posix" on "memory".
struct UcxResource {
  std::string transport;
  std::string device;
};

// The resources in ucp_context_print_info's text (its "resource N : md M dev D flags -- tl/dev"
// lines, the only place 1.13 lists what a context selected).
std::vector<UcxResource> parse_context_info(std::string_view text);

// Why a context with these resources makes no error-handling endpoint (what connect() makes to
// each peer), or "" when it can: UCX 1.13 refuses one over posix, sysv and cma alone ("no peer
// failure handler"), so it needs a transport on a network device (tcp, rc, ud, ...).
std::string error_handling_problem(const std::vector<UcxResource>& resources);

// Whether these include a network of UCX's own beyond tcp: RDMA (rc, ud, dc and their
// variants rc_verbs, rc_mlx5, dc_mlx5, ...).
bool has_rdma_network(const std::vector<UcxResource>& resources);

// "UCX 1.13.1: tcp (eth0, lo), sysv, posix, cma": each transport once, its network devices in
// parentheses, self (a worker to itself) left out.
std::string describe(const std::string& version, const std::vector<UcxResource>& resources);

// Makes a context (UCX_TLS and the rest as the environment says) and judges its resources by
// error_handling_problem; only where their list cannot be read, it makes an error-handling
// endpoint between two workers of the context to find out. Opens no worker otherwise.
NetAvailability probe_availability();

}  // namespace ccl::transport::ucx
