// ucx_availability(): what this host's UCX offers, and the rule for taking it by default.
#include "transport/ucx/ucx_availability.h"

#include <gtest/gtest.h>

#include "transport/ucx/ucx_transport.h"

namespace ccl::transport::ucx {
namespace {

// As UCX 1.13.1 prints a context on this machine (ucp_context_print_info).
constexpr const char* kInfo13 =
    "#\n"
    "# UCP context\n"
    "#\n"
    "#            md 0  :  component 0  self \n"
    "#            md 1  :  component 1  tcp \n"
    "#      resource 0  :  md 0  dev 0  flags -- self/memory0\n"
    "#      resource 1  :  md 1  dev 1  flags -- tcp/eth0\n"
    "#      resource 2  :  md 1  dev 2  flags -- tcp/lo\n"
    "#      resource 3  :  md 2  dev 3  flags -- sysv/memory\n"
    "#      resource 4  :  md 3  dev 3  flags -- posix/memory\n"
    "#      resource 5  :  md 4  dev 3  flags -- cma/memory\n";

TEST(UcxAvailability, ParsesContextInfo) {
  auto resources = parse_context_info(kInfo13);
  ASSERT_EQ(resources.size(), 6u);
  EXPECT_EQ(resources[1].transport, "tcp");
  EXPECT_EQ(resources[1].device, "eth0");
  EXPECT_EQ(resources[5].transport, "cma");
  EXPECT_FALSE(has_rdma_network(resources));
  EXPECT_EQ(describe("1.13.1", resources), "UCX 1.13.1: tcp (eth0, lo), sysv, posix, cma");
  EXPECT_TRUE(parse_context_info("garbage\n# resource without flags\n").empty());
}

TEST(UcxAvailability, RdmaTransportsMakeItTheDefault) {
  for (const char* tl : {"rc_verbs", "rc_mlx5", "ud_verbs", "ud_mlx5", "dc_mlx5", "rc", "ud"}) {
    std::vector<UcxResource> resources = {{"tcp", "eth0"}, {tl, "mlx5_0:1"}};
    EXPECT_TRUE(has_rdma_network(resources)) << tl;
  }
  for (const char* tl : {"tcp", "posix", "sysv", "cma", "self", "knem", "xpmem", "cuda_ipc"}) {
    std::vector<UcxResource> resources = {{tl, "memory"}};
    EXPECT_FALSE(has_rdma_network(resources)) << tl;
  }
}

TEST(UcxAvailability, ErrorHandlingNeedsANetworkDevice) {
  const std::vector<UcxResource> memory_only = {
      {"self", "memory"}, {"posix", "memory"}, {"sysv", "memory"}, {"cma", "memory"}};
  EXPECT_NE(error_handling_problem(memory_only).find("no error-handling endpoint"),
            std::string::npos);
  EXPECT_NE(error_handling_problem({}), "");
  for (const UcxResource& net : {UcxResource{"tcp", "lo"}, UcxResource{"tcp", "veth0"},
                                 UcxResource{"rc_mlx5", "mlx5_0:1"}}) {
    std::vector<UcxResource> resources = memory_only;
    resources.push_back(net);
    EXPECT_EQ(error_handling_problem(resources), "") << net.transport;
  }
}

// This machine: UCX with tcp and shared memory only.
TEST(UcxAvailability, ThisHost) {
  unsetenv("UCX_TLS");
  const NetAvailability a = ucx_availability();
  EXPECT_TRUE(a.available) << a.detail;
  EXPECT_FALSE(a.by_default) << a.detail;
  EXPECT_NE(a.detail.find("UCX "), std::string::npos) << a.detail;
  EXPECT_NE(a.detail.find("tcp"), std::string::npos) << a.detail;
  EXPECT_NE(a.detail.find("posix"), std::string::npos) << a.detail;

  setenv("UCX_TLS", "tcp", 1);
  const NetAvailability tcp = probe_availability();
  EXPECT_TRUE(tcp.available) << tcp.detail;
  EXPECT_FALSE(tcp.by_default);
  EXPECT_EQ(tcp.detail.find("posix"), std::string::npos) << tcp.detail;

  // UCX 1.13 makes no error-handling endpoint over shared memory alone.
  setenv("UCX_TLS", "posix,sysv,cma", 1);
  const NetAvailability shm = probe_availability();
  EXPECT_FALSE(shm.available) << shm.detail;
  EXPECT_FALSE(shm.by_default);
  EXPECT_NE(shm.detail.find("no error-handling endpoint"), std::string::npos) << shm.detail;

  // The public answer is cached: the same whatever UCX_TLS says now.
  const NetAvailability again = ucx_availability();
  EXPECT_EQ(again.detail, a.detail);
  EXPECT_TRUE(again.available);
  unsetenv("UCX_TLS");
}

}  // namespace
}  // namespace ccl::transport::ucx
