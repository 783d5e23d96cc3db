// Interface listing and the CCL_SOCKET_IFNAME / CCL_SOCKET_FAMILY selection (socket.h).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cctype>
#include <cstring>

#include "core/bootstrap/socket.h"
#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

namespace ccl {

namespace {

bool is_link_local_v6(const sockaddr_in6& a) {
  return a.sin6_addr.s6_addr[0] == 0xfe && (a.sin6_addr.s6_addr[1] & 0xc0) == 0x80;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// CCL_SOCKET_FAMILY: "" (either), AF_INET or AF_INET6. Also accepts 4/6 and ipv4/ipv6.
int wanted_family() {
  std::string f = config_string("CCL_SOCKET_FAMILY");
  if (f.empty()) return AF_UNSPEC;
  for (auto& c : f) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  if (f == "AF_INET" || f == "INET" || f == "IPV4" || f == "4") return AF_INET;
  if (f == "AF_INET6" || f == "INET6" || f == "IPV6" || f == "6") return AF_INET6;
  throw_error(cclInvalidUsage, "CCL_SOCKET_FAMILY='%s' is not AF_INET or AF_INET6", f.c_str());
}

}  // namespace

std::vector<NetInterface> list_interfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw_system_error(errno, "getifaddrs");
  std::vector<NetInterface> out;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    int family = ifa->ifa_addr->sa_family;
    NetInterface ni;
    ni.name = ifa->ifa_name;
    if (family == AF_INET) {
      memcpy(&ni.address.storage, ifa->ifa_addr, sizeof(sockaddr_in));
      ni.address.length = sizeof(sockaddr_in);
    } else if (family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
      // Link-local addresses need a scope id at every use; peers cannot simply connect to them.
      if (is_link_local_v6(*v6)) continue;
      memcpy(&ni.address.storage, ifa->ifa_addr, sizeof(sockaddr_in6));
      ni.address.length = sizeof(sockaddr_in6);
    } else {
      continue;
    }
    ni.address.set_port(0);
    out.push_back(std::move(ni));
  }
  freeifaddrs(list);
  return out;
}

// NCCL's syntax: "^" excludes, "=" asks for exact names, "^=" both; the rest is a comma-separated
// list. An empty list (no filter) matches every interface.
bool interface_matches(const std::string& name, const std::string& filter) {
  size_t pos = 0;
  bool exclude = false, exact = false;
  if (pos < filter.size() && filter[pos] == '^') {
    exclude = true;
    ++pos;
  }
  if (pos < filter.size() && filter[pos] == '=') {
    exact = true;
    ++pos;
  }
  bool any_entry = false, hit = false;
  while (pos <= filter.size()) {
    size_t comma = filter.find(',', pos);
    if (comma == std::string::npos) comma = filter.size();
    std::string entry = filter.substr(pos, comma - pos);
    pos = comma + 1;
    if (entry.empty()) continue;
    any_entry = true;
    if (exact ? name == entry : starts_with(name, entry)) hit = true;
  }
  if (!any_entry) return true;
  return exclude ? !hit : hit;
}

NetInterface choose_interface() {
  const std::string filter = config_string("CCL_SOCKET_IFNAME");
  const int family = wanted_family();
  std::vector<NetInterface> all = list_interfaces();
  // Given a family preference of AF_UNSPEC, IPv4 wins over IPv6 among equally good interfaces.
  auto pick = [&](auto&& acceptable) -> const NetInterface* {
    for (int f : {AF_INET, AF_INET6}) {
      if (family != AF_UNSPEC && f != family) continue;
      for (const auto& ni : all) {
        if (ni.address.family() == f && acceptable(ni.name)) return &ni;
      }
    }
    return nullptr;
  };
  const NetInterface* chosen = nullptr;
  if (!filter.empty()) {
    chosen = pick([&](const std::string& n) { return interface_matches(n, filter); });
    if (chosen == nullptr) {
      throw_error(cclSystemError, "no network interface matches CCL_SOCKET_IFNAME='%s'%s",
                  filter.c_str(), family != AF_UNSPEC ? " with CCL_SOCKET_FAMILY" : "");
    }
  } else {
    chosen = pick(
        [](const std::string& n) { return !starts_with(n, "lo") && !starts_with(n, "docker"); });
    if (chosen == nullptr) chosen = pick([](const std::string& n) { return starts_with(n, "lo"); });
    if (chosen == nullptr) {
      throw_error(cclSystemError, "no usable network interface (none up with an address%s)",
                  family != AF_UNSPEC ? " of CCL_SOCKET_FAMILY" : "");
    }
  }
  CCL_INFO(kBootstrap, "using interface %s address %s", chosen->name.c_str(),
           chosen->address.host().c_str());
  return *chosen;
}

}  // namespace ccl
