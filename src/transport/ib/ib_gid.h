// RoCE GID selection. A RoCE port has a table of GIDs, one per (address, RoCE version) the
// kernel derived from the netdev's addresses; ccl talks RoCE v2 (routable UDP) from a global
// address of the wanted family. The kernel says each entry's type and address in sysfs:
//   <root>/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index>  ("RoCE v2", "IB/RoCE v1")
//   <root>/class/infiniband/<dev>/ports/<port>/gids/<index>             (fe80:0000:...:0001)
// The root is a parameter so that tests build a fake tree in a temporary directory.
// InfiniBand ports need none of this: they are addressed by LID.
#pragma once

#include <infiniband/verbs.h>

#include <optional>
#include <string>

namespace ccl::transport::ib {

struct GidPolicy {
  int index = -1;  // CCL_IB_GID_INDEX: >= 0 forces that entry
  int family = 0;  // AF_INET (IPv4-mapped GIDs) or AF_INET6 (any other)
};
// From CCL_IB_GID_INDEX and CCL_IB_ADDR_FAMILY; InvalidUsage for a family that is neither.
GidPolicy gid_policy_from_config();

struct GidChoice {
  int index = -1;
  ibv_gid gid{};
  std::string type;  // as sysfs says it ("RoCE v2"), "" when unknown
};

// The process's sysfs root ("/sys"), which tests may point at a fake tree.
std::string ib_sysfs_root();
void set_ib_sysfs_root_for_tests(const std::string& root);

// The GID `policy` picks on `device`:`port` from the tree at `sysfs_root`: policy.index if it is
// set (its address from sysfs when readable), else the lowest index whose type is RoCE v2, whose
// address is not link-local (fe80::/10) nor zero and is of policy.family. Nothing, and *why,
// when none qualifies.
std::optional<GidChoice> select_roce_gid(const std::string& sysfs_root, const std::string& device,
                                         int port, const GidPolicy& policy, std::string* why);

std::string gid_to_string(const ibv_gid& gid);          // "::ffff:10.0.0.1", "fd00::1"
bool parse_gid(const std::string& text, ibv_gid* gid);  // sysfs's or inet_pton's form
bool gid_is_link_local(const ibv_gid& gid);
bool gid_is_ipv4_mapped(const ibv_gid& gid);
bool gid_is_zero(const ibv_gid& gid);

}  // namespace ccl::transport::ib
