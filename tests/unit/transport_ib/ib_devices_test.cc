// Which ports the transport takes: CCL_IB_HCA's syntax, active ports only, the RoCE v2 GID from a
// fake sysfs tree, and what ib_availability() says, including without the verbs library.
#include "transport/ib/ib_devices.h"

#include <sys/socket.h>

#include <iostream>

#include "ib_test_util.h"
#include "transport/ib/ib_gid.h"

namespace ccl::transport::ib_test {
namespace {

using namespace ib;
using ib::mock::gid_of;
using ib::mock::MockGid;

TEST(IbHcaFilter, PrefixesExclusionExactNamesAndPorts) {
  HcaFilter all = parse_hca_filter("");
  EXPECT_TRUE(all.accepts("mlx5_0", 1));

  HcaFilter prefix = parse_hca_filter("mlx5");
  EXPECT_TRUE(prefix.accepts("mlx5_0", 1));
  EXPECT_TRUE(prefix.accepts("mlx5_11", 2));
  EXPECT_FALSE(prefix.accepts("mlx4_0", 1));

  HcaFilter exact = parse_hca_filter("=mlx5_1");
  EXPECT_TRUE(exact.accepts("mlx5_1", 1));
  EXPECT_FALSE(exact.accepts("mlx5_10", 1));

  HcaFilter excluded = parse_hca_filter("^mlx5_0");
  EXPECT_FALSE(excluded.accepts("mlx5_0", 1));
  EXPECT_FALSE(excluded.accepts("mlx5_01", 1));  // a prefix
  EXPECT_TRUE(excluded.accepts("mlx5_1", 1));

  HcaFilter excluded_exact = parse_hca_filter("^=mlx5_0");
  EXPECT_FALSE(excluded_exact.accepts("mlx5_0", 1));
  EXPECT_TRUE(excluded_exact.accepts("mlx5_01", 1));

  HcaFilter ports = parse_hca_filter("mlx5_0:1, mlx5_1:2");
  ASSERT_EQ(ports.entries.size(), 2u);
  EXPECT_TRUE(ports.accepts("mlx5_0", 1));
  EXPECT_FALSE(ports.accepts("mlx5_0", 2));
  EXPECT_TRUE(ports.accepts("mlx5_1", 2));
  EXPECT_FALSE(ports.accepts("mlx5_1", 1));

  HcaFilter not_port = parse_hca_filter("^mlx5_0:2");
  EXPECT_TRUE(not_port.accepts("mlx5_0", 1));
  EXPECT_FALSE(not_port.accepts("mlx5_0", 2));
}

TEST(IbHcaFilter, MalformedPortsAreRefused) {
  for (const char* bad : {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:1x", ":1"}) {
    expect_error([&] { parse_hca_filter(bad); }, cclInvalidUsage, "CCL_IB_HCA");
  }
}

// Devices: mlx5_0 with port 1 down and port 2 active (InfiniBand), mlx5_1 active, mlx4_0 RoCE.
class IbScan : public IbTest {
 protected:
  void add_devices() override {
    MockPort down;
    down.state = IBV_PORT_DOWN;
    MockPort up;
    up.lid = 3;
    mock_->add_device(MockDevice{"mlx5_0", {down, up}});
    MockPort other;
    other.lid = 4;
    mock_->add_device(MockDevice{"mlx5_1", {other}});
    MockPort roce;
    roce.ethernet = true;
    roce.gids = {MockGid{gid_of("fe80::1"), "IB/RoCE v1"}, MockGid{gid_of("fe80::1"), "RoCE v2"},
                 MockGid{gid_of("::ffff:10.0.0.5"), "IB/RoCE v1"},
                 MockGid{gid_of("fd00::5"), "RoCE v2"},
                 MockGid{gid_of("::ffff:10.0.0.5"), "RoCE v2"}};
    mock_->add_device(MockDevice{"mlx4_0", {roce}});
  }
  std::vector<std::string> scan(const std::string& hca) {
    use_fake_sysfs();
    GidPolicy policy = gid_policy_from_config();
    std::vector<std::string> out;
    for (const IbPort& p :
         scan_ports(mock_->api(), parse_hca_filter(hca), policy, sysfs_.string()).ports)
      out.push_back(p.describe());
    return out;
  }
};

TEST_F(IbScan, ActivePortsThatPassTheFilter) {
  EXPECT_EQ(scan(""), (std::vector<std::string>{"mlx5_0:2 IB LID 3", "mlx5_1:1 IB LID 4",
                                                "mlx4_0:1 RoCE v2 GID 4 ::ffff:10.0.0.5"}));
  EXPECT_EQ(scan("mlx5"), (std::vector<std::string>{"mlx5_0:2 IB LID 3", "mlx5_1:1 IB LID 4"}));
  EXPECT_EQ(scan("^mlx5"), (std::vector<std::string>{"mlx4_0:1 RoCE v2 GID 4 ::ffff:10.0.0.5"}));
  EXPECT_EQ(scan("mlx5_0:1"), std::vector<std::string>{});  // down
  EXPECT_EQ(scan("=mlx5_1"), (std::vector<std::string>{"mlx5_1:1 IB LID 4"}));
}

TEST_F(IbScan, RoceV2GidSelection) {
  // AF_INET: the IPv4-mapped RoCE v2 entry (4), not the v1 one (2) nor the link-local v2 (1).
  EXPECT_EQ(scan("mlx4"), (std::vector<std::string>{"mlx4_0:1 RoCE v2 GID 4 ::ffff:10.0.0.5"}));
  setenv("CCL_IB_ADDR_FAMILY", "AF_INET6", 1);
  EXPECT_EQ(scan("mlx4"), (std::vector<std::string>{"mlx4_0:1 RoCE v2 GID 3 fd00::5"}));
  setenv("CCL_IB_GID_INDEX", "2", 1);  // forced, whatever its type
  EXPECT_EQ(scan("mlx4"), (std::vector<std::string>{"mlx4_0:1 IB/RoCE v1 GID 2 ::ffff:10.0.0.5"}));
  setenv("CCL_IB_ADDR_FAMILY", "AF_UNIX", 1);
  expect_error([&] { scan("mlx4"); }, cclInvalidUsage, "CCL_IB_ADDR_FAMILY");
}

TEST(IbGid, SelectionFromAFakeTree) {
  const std::string root = std::filesystem::temp_directory_path() / unique_tag("ccl-ib-gid");
  const std::string dir = root + "/class/infiniband/roce0/ports/1";
  std::filesystem::create_directories(dir + "/gids");
  std::filesystem::create_directories(dir + "/gid_attrs/types");
  auto entry = [&](int i, const char* gid, const char* type) {
    std::ofstream(dir + "/gids/" + std::to_string(i)) << gid << "\n";
    if (type != nullptr)
      std::ofstream(dir + "/gid_attrs/types/" + std::to_string(i)) << type << "\n";
  };
  entry(0, "fe80:0000:0000:0000:0202:c9ff:fe00:0001", "IB/RoCE v1");
  entry(1, "fe80:0000:0000:0000:0202:c9ff:fe00:0001", "RoCE v2");
  entry(2, "0000:0000:0000:0000:0000:ffff:c0a8:0102", "IB/RoCE v1");
  entry(3, "0000:0000:0000:0000:0000:0000:0000:0000", nullptr);     // unused: no readable type
  entry(10, "0000:0000:0000:0000:0000:ffff:c0a8:0102", "RoCE v2");  // sorted numerically
  std::string why;
  auto v4 = select_roce_gid(root, "roce0", 1, GidPolicy{-1, AF_INET}, &why);
  ASSERT_TRUE(v4.has_value()) << why;
  EXPECT_EQ(v4->index, 10);
  EXPECT_EQ(gid_to_string(v4->gid), "::ffff:192.168.1.2");
  EXPECT_FALSE(select_roce_gid(root, "roce0", 1, GidPolicy{-1, AF_INET6}, &why).has_value());
  EXPECT_NE(why.find("no RoCE v2 GID of family AF_INET6"), std::string::npos) << why;
  auto forced = select_roce_gid(root, "roce0", 1, GidPolicy{1, AF_INET}, &why);
  ASSERT_TRUE(forced.has_value());
  EXPECT_EQ(forced->index, 1);
  EXPECT_EQ(forced->type, "RoCE v2");
  EXPECT_FALSE(select_roce_gid(root, "nodev", 1, GidPolicy{-1, AF_INET}, &why).has_value());
  EXPECT_NE(why.find("cannot read"), std::string::npos) << why;
  std::filesystem::remove_all(root);
}

TEST(IbGid, Classification) {
  EXPECT_TRUE(gid_is_link_local(gid_of("fe80::1")));
  EXPECT_TRUE(gid_is_link_local(gid_of("febf::1")));
  EXPECT_FALSE(gid_is_link_local(gid_of("fec0::1")));
  EXPECT_TRUE(gid_is_ipv4_mapped(gid_of("::ffff:1.2.3.4")));
  EXPECT_FALSE(gid_is_ipv4_mapped(gid_of("fd00::ffff:1.2.3.4")));
  EXPECT_TRUE(gid_is_zero(gid_of("::")));
}

TEST_F(IbScan, AvailabilityNamesThePortOrTheReason) {
  use_fake_sysfs();
  NetAvailability a = ib_availability();
  EXPECT_TRUE(a.available);
  EXPECT_TRUE(a.by_default);
  EXPECT_EQ(a.detail, "mlx5_0:2 IB LID 3 (+2)");
  setenv("CCL_IB_HCA", "mlx4", 1);
  EXPECT_EQ(ib_availability().detail, "mlx4_0:1 RoCE v2 GID 4 ::ffff:10.0.0.5");
  setenv("CCL_IB_HCA", "mlx5_0:1", 1);
  a = ib_availability();
  EXPECT_FALSE(a.available);
  EXPECT_NE(a.detail.find("mlx5_0:1 is DOWN"), std::string::npos) << a.detail;
  setenv("CCL_IB_HCA", "nothing", 1);
  a = ib_availability();
  EXPECT_FALSE(a.available);
  EXPECT_NE(a.detail.find("excluded by CCL_IB_HCA"), std::string::npos) << a.detail;
  // make_ib_transport says the same.
  InMemoryStore store;
  expect_error([&] { make_ib_transport(make_context(0, 2, unique_tag("none"), &store)); },
               cclSystemError, "excluded by CCL_IB_HCA");
}

class IbNoDevice : public IbTest {
  void add_devices() override {}
};

TEST_F(IbNoDevice, UnavailableWithoutADevice) {
  NetAvailability a = ib_availability();
  EXPECT_FALSE(a.available);
  EXPECT_FALSE(a.by_default);
  EXPECT_EQ(a.detail, "no InfiniBand/RoCE device found");
}

// No mock here: the real loader, pointed at a library that does not exist.
TEST(IbLibrary, MissingLibraryMakesIbUnavailableAndSaysWhy) {
  reset_ib_environment();
  setenv("CCL_IB_LIBRARY", "/nonexistent/libibverbs.so.1", 1);
  NetAvailability a = ib_availability();
  EXPECT_FALSE(a.available);
  EXPECT_FALSE(a.by_default);
  EXPECT_NE(a.detail.find("/nonexistent/libibverbs.so.1"), std::string::npos) << a.detail;
  EXPECT_NE(a.detail.find("No such file or directory"), std::string::npos) << a.detail;
  // Asked again (loaded once): the same answer, and making a transport fails cleanly.
  EXPECT_EQ(ib_availability().detail, a.detail);
  InMemoryStore store;
  expect_error([&] { make_ib_transport(make_context(0, 2, unique_tag("nolib"), &store)); },
               cclSystemError, "/nonexistent/libibverbs.so.1");
  // A library without the verbs symbols.
  setenv("CCL_IB_LIBRARY", "libm.so.6", 1);
  a = ib_availability();
  EXPECT_FALSE(a.available);
  EXPECT_NE(a.detail.find("ibv_get_device_list"), std::string::npos) << a.detail;
  reset_ib_environment();
}

// The real library where it is installed (this build found verbs.h): every symbol resolves, and
// without a device ib is unavailable with a reason rather than a crash.
TEST(IbLibrary, TheInstalledLibraryLoadsOrSaysWhy) {
  reset_ib_environment();
  std::string why;
  const ib::VerbsApi* api = ib::verbs_api(&why);
  NetAvailability a = ib_availability();
  EXPECT_FALSE(a.detail.empty());
  if (api == nullptr) {
    EXPECT_EQ(a.detail, why);
    EXPECT_FALSE(a.available);
  }
  std::cout << "ib on this host: " << (a.available ? "available, " : "unavailable, ") << a.detail
            << "\n";
}

}  // namespace
}  // namespace ccl::transport::ib_test
