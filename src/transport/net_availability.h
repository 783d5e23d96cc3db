// Whether a network transport can run on this host, and why not: each network transport (ib, ucx,
// tcp) answers without connecting anything, so the communicator can choose a transport for each
// pair of ranks on different hosts (core/comm/transport_choice.h) and ccl-topo can print what this
// host offers. Cheap enough to ask once per communicator init.
#pragma once

#include <string>

namespace ccl::transport {

struct NetAvailability {
  bool available = false;
  // Taken without being asked for (CCL_NET unset): ib where a device is up; ucx only where UCX
  // has a network of its own beyond tcp (on plain TCP ccl's tcp is measured faster).
  bool by_default = false;
  // One line: what was found ("mlx5_0:1 RoCE v2 GID 3", "UCX 1.13.1: tcp, posix, sysv, cma"), or
  // why it is not available ("libibverbs.so.1: cannot open shared object file").
  std::string detail;
};

}  // namespace ccl::transport
