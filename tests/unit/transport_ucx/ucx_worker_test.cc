// ucx_tcp_may_run(): where the worker sets its tcp defaults (ucx_worker.cc), and where it leaves
// them out so that UCX does not warn of keys no transport took.
#include "transport/ucx/ucx_worker.h"

#include <gtest/gtest.h>

namespace ccl::transport::ucx {
namespace {

TEST(UcxTcpMayRun, UnsetOrEmptyTlsIsUcxsDefaultOfAll) {
  EXPECT_TRUE(ucx_tcp_may_run(nullptr, nullptr));
  EXPECT_TRUE(ucx_tcp_may_run("", nullptr));
  EXPECT_TRUE(ucx_tcp_may_run(nullptr, ""));
}

TEST(UcxTcpMayRun, AListMustNameTcpOrAll) {
  EXPECT_TRUE(ucx_tcp_may_run("tcp", nullptr));
  EXPECT_TRUE(ucx_tcp_may_run("rc,tcp", nullptr));
  EXPECT_TRUE(ucx_tcp_may_run("all", nullptr));
  EXPECT_FALSE(ucx_tcp_may_run("rc,ud", nullptr));
  EXPECT_FALSE(ucx_tcp_may_run("posix,sysv,cma", nullptr));
  EXPECT_FALSE(ucx_tcp_may_run("tcpx", nullptr));  // a name, not a prefix
}

TEST(UcxTcpMayRun, AnExclusionMustNotNameTcp) {
  EXPECT_TRUE(ucx_tcp_may_run("^rc", nullptr));
  EXPECT_TRUE(ucx_tcp_may_run("^all", nullptr));  // "all" is no transport name to exclude
  EXPECT_FALSE(ucx_tcp_may_run("^tcp", nullptr));
  EXPECT_FALSE(ucx_tcp_may_run("^rc,tcp", nullptr));
}

TEST(UcxTcpMayRun, NamedDevicesLeaveTuningToTheUser) {
  EXPECT_FALSE(ucx_tcp_may_run(nullptr, "mlx5_0:1"));
  EXPECT_FALSE(ucx_tcp_may_run("tcp", "eth0"));
}

}  // namespace
}  // namespace ccl::transport::ucx
