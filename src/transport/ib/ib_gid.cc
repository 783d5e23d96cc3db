#include "transport/ib/ib_gid.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "base/config.h"
#include "base/error.h"

namespace ccl::transport::ib {
namespace {

std::mutex g_root_mutex;
std::string g_root = "/sys";

std::string port_dir(const std::string& root, const std::string& device, int port) {
  return root + "/class/infiniband/" + device + "/ports/" + std::to_string(port);
}

// The first line of a sysfs file, trimmed; nothing when it cannot be read (an unused GID
// entry's type reads as EINVAL on a real system).
std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ' || line.back() == '\r'))
    line.pop_back();
  return line;
}

bool family_matches(const ibv_gid& gid, int family) {
  return family == AF_INET ? gid_is_ipv4_mapped(gid) : !gid_is_ipv4_mapped(gid);
}

}  // namespace

GidPolicy gid_policy_from_config() {
  GidPolicy policy;
  policy.index = static_cast<int>(config_int("CCL_IB_GID_INDEX"));
  const std::string family = config_string("CCL_IB_ADDR_FAMILY");
  if (family == "AF_INET") {
    policy.family = AF_INET;
  } else if (family == "AF_INET6") {
    policy.family = AF_INET6;
  } else {
    throw_error(cclInvalidUsage, "CCL_IB_ADDR_FAMILY='%s': expected AF_INET or AF_INET6",
                family.c_str());
  }
  return policy;
}

std::string ib_sysfs_root() {
  std::lock_guard<std::mutex> lock(g_root_mutex);
  return g_root;
}

void set_ib_sysfs_root_for_tests(const std::string& root) {
  std::lock_guard<std::mutex> lock(g_root_mutex);
  g_root = root.empty() ? "/sys" : root;
}

bool gid_is_link_local(const ibv_gid& gid) {
  return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80;
}

bool gid_is_ipv4_mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

bool gid_is_zero(const ibv_gid& gid) {
  return std::all_of(std::begin(gid.raw), std::end(gid.raw), [](uint8_t b) { return b == 0; });
}

std::string gid_to_string(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.raw, text, sizeof(text)) == nullptr) return "?";
  return text;
}

bool parse_gid(const std::string& text, ibv_gid* gid) {
  return inet_pton(AF_INET6, text.c_str(), gid->raw) == 1;
}

std::optional<GidChoice> select_roce_gid(const std::string& sysfs_root, const std::string& device,
                                         int port, const GidPolicy& policy, std::string* why) {
  const std::string dir = port_dir(sysfs_root, device, port);
  auto entry = [&](int index) {
    GidChoice c;
    c.index = index;
    c.type = read_line(dir + "/gid_attrs/types/" + std::to_string(index)).value_or("");
    auto text = read_line(dir + "/gids/" + std::to_string(index));
    if (!text || !parse_gid(*text, &c.gid)) c.gid = ibv_gid{};
    return c;
  };
  if (policy.index >= 0) return entry(policy.index);

  std::vector<int> indexes;
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir + "/gids", ec)) {
    const std::string name = file.path().filename().string();
    if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit))
      indexes.push_back(std::stoi(name));
  }
  if (ec) {
    *why = device + ":" + std::to_string(port) + ": cannot read " + dir + "/gids (" + ec.message() +
           ")";
    return std::nullopt;
  }
  std::sort(indexes.begin(), indexes.end());
  for (int index : indexes) {
    GidChoice c = entry(index);
    if (c.type != "RoCE v2" || gid_is_zero(c.gid) || gid_is_link_local(c.gid)) continue;
    if (!family_matches(c.gid, policy.family)) continue;
    return c;
  }
  *why = device + ":" + std::to_string(port) + ": no RoCE v2 GID of family " +
         (policy.family == AF_INET ? "AF_INET" : "AF_INET6") +
         " that is not link-local (set CCL_IB_GID_INDEX or CCL_IB_ADDR_FAMILY)";
  return std::nullopt;
}

}  // namespace ccl::transport::ib
