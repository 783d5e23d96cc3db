// CCL_SOCKET_IFNAME syntax and interface selection.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "../support/scoped_env.h"
#include "base/error.h"
#include "core/bootstrap/socket.h"

namespace ccl {
namespace {

TEST(InterfaceFilter, FollowsNcclSyntax) {
  struct Case {
    const char* filter;
    const char* name;
    bool match;
  };
  const Case cases[] = {
      {"", "eth0", true},     // no filter: everything
      {"eth", "eth0", true},  // prefix
      {"eth", "eth10", true},      {"eth", "ib0", false},
      {"eth,ib", "ib0", true},                                        // list
      {"eth,ib", "lo", false},     {"^docker,lo", "docker0", false},  // exclusion
      {"^docker,lo", "lo", false}, {"^docker,lo", "eth0", true},
      {"=eth0", "eth0", true},  // exact
      {"=eth0", "eth01", false},   {"=eth0,ib1", "ib1", true},
      {"=eth0,ib1", "ib", false},  {"^=eth0", "eth0", false},  // exact exclusion
      {"^=eth0", "eth01", true},   {"^=eth0", "lo", true},
      {"eth,,ib", "ib3", true},                             // empty entries are ignored
      {"^", "eth0", true},                                  // no entries: no filter
      {"=", "eth0", true},         {"ETH", "eth0", false},  // case matters, as in interface names
  };
  for (const auto& c : cases) {
    EXPECT_EQ(interface_matches(c.name, c.filter), c.match)
        << "filter '" << c.filter << "' name '" << c.name << "'";
  }
}

TEST(Interfaces, ListsLoopback) {
  auto all = list_interfaces();
  bool found = false;
  for (const auto& ni : all) {
    EXPECT_EQ(ni.address.port(), 0);
    EXPECT_TRUE(ni.address.family() == AF_INET || ni.address.family() == AF_INET6);
    EXPECT_FALSE(ni.address.host().rfind("fe80", 0) == 0) << "link-local " << ni.name;
    if (ni.name == "lo" && ni.address.host() == "127.0.0.1") found = true;
  }
  EXPECT_TRUE(found);
}

using ccl::test::ScopedEnv;

TEST(Interfaces, ChooseHonorsIfnameAndFamily) {
  {
    ScopedEnv ifname("CCL_SOCKET_IFNAME", "=lo");
    ScopedEnv family("CCL_SOCKET_FAMILY", nullptr);
    NetInterface ni = choose_interface();
    EXPECT_EQ(ni.name, "lo");
    EXPECT_EQ(ni.address.host(), "127.0.0.1");  // IPv4 first when the family is not forced
  }
  {
    ScopedEnv ifname("CCL_SOCKET_IFNAME", "lo");
    ScopedEnv family("CCL_SOCKET_FAMILY", "AF_INET6");
    bool has_v6_lo = false;
    for (const auto& ni : list_interfaces()) {
      if (ni.name == "lo" && ni.address.family() == AF_INET6) has_v6_lo = true;
    }
    if (has_v6_lo) {
      NetInterface ni = choose_interface();
      EXPECT_EQ(ni.address.family(), AF_INET6);
      EXPECT_EQ(ni.address.host(), "::1");
    }
  }
  {
    ScopedEnv ifname("CCL_SOCKET_IFNAME", "=no-such-interface");
    try {
      choose_interface();
      FAIL() << "chose an interface that does not exist";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclSystemError);
    }
  }
  {
    ScopedEnv family("CCL_SOCKET_FAMILY", "AF_UNIX");
    try {
      choose_interface();
      FAIL() << "accepted CCL_SOCKET_FAMILY=AF_UNIX";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidUsage);
    }
  }
  {
    // Unset: anything but loopback and docker if there is one, loopback otherwise.
    ScopedEnv ifname("CCL_SOCKET_IFNAME", nullptr);
    ScopedEnv family("CCL_SOCKET_FAMILY", "AF_INET");
    bool has_other = false;
    for (const auto& ni : list_interfaces()) {
      if (ni.address.family() == AF_INET && ni.name.rfind("lo", 0) != 0 &&
          ni.name.rfind("docker", 0) != 0) {
        has_other = true;
      }
    }
    NetInterface ni = choose_interface();
    EXPECT_EQ(ni.address.family(), AF_INET);
    EXPECT_EQ(ni.name.rfind("lo", 0) != 0, has_other) << ni.name;
    EXPECT_NE(ni.name.rfind("docker", 0), 0u);
  }
}

}  // namespace
}  // namespace ccl
