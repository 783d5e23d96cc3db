#include "topology/host_id.h"

#include <unistd.h>

#include <fstream>

#include "base/config.h"

namespace ccl {

std::string host_id() {
  std::string id = config_string("CCL_HOSTID");
  if (!id.empty()) return id;
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  id = host;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (boot >> boot_id) id += "/" + boot_id;
  return id;
}

}  // namespace ccl
