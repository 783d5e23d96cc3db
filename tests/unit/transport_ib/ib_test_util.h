// Shared helpers of the ib transport tests: a MockVerbs with one InfiniBand port installed for
// each test (IbTest), ranks as threads over one InMemoryStore (each thread its own mock
// "process"), sinks of each kind, a bounded progress loop and byte patterns that catch
// misplaced bytes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/transport_test_sinks.h"
#include "base/error.h"
#include "core/bootstrap/store.h"
#include "mock_verbs.h"
#include "transport/ib/ib_gid.h"
#include "transport/ib/ib_transport.h"
#include "transport/transport.h"

namespace ccl::transport::ib_test {

using ib::mock::MockDevice;
using ib::mock::MockPort;
using ib::mock::MockVerbs;

using transport_test::drive_until_error;
using transport_test::expect_error;
using transport_test::first_mismatch;
using transport_test::make_message;
using transport_test::pattern;
using transport_test::SinkKind;
using transport_test::TestSink;
using transport_test::unique_tag;

// transport_test::make_context, each rank on a host of its own.
inline SetupContext make_context(int rank, int nranks, const std::string& tag, Store* store,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                 const AbortFlag* abort = nullptr) {
  SetupContext ctx = transport_test::make_context(rank, nranks, tag, store, timeout, abort);
  for (int r = 0; r < nranks; ++r) ctx.peers[r].host_id = "host" + std::to_string(r);
  return ctx;
}

inline bool drive(Transport& transport, const std::vector<Connection*>& conns,
                  const std::function<bool()>& done,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return transport_test::drive(transport, conns, done, timeout);
}

// Runs fn(rank) on `nranks` threads, each its own mock process; an exception fails the test.
inline void run_ranks(int nranks, const std::function<void(int)>& fn) {
  transport_test::run_ranks(nranks, fn, [](int r) { MockVerbs::set_thread_process(r); });
}

struct Mesh : transport_test::MeshConnections {
  static Mesh make(int nranks, InMemoryStore& store, const std::string& tag,
                   const AbortFlag* abort = nullptr) {
    Mesh m;
    m.resize(nranks);
    run_ranks(nranks, [&](int rank) {
      SetupContext ctx = make_context(rank, nranks, tag, &store, std::chrono::seconds(10), abort);
      m.connect_rank(ctx, make_ib_transport(ctx));
    });
    return m;
  }
};

// Every variable the transport reads, back to its default.
inline void reset_ib_environment() {
  for (const char* name :
       {"CCL_IB_HCA", "CCL_IB_GID_INDEX", "CCL_IB_ADDR_FAMILY", "CCL_IB_TIMEOUT",
        "CCL_IB_RETRY_CNT", "CCL_IB_QPS_PER_CONNECTION", "CCL_IB_LIBRARY", "CCL_BUFFSIZE"}) {
    unsetenv(name);
  }
}

// A mock with one active InfiniBand port (mlx5_0:1, LID 7) for each test; the objects it holds
// must all be gone when the test ends.
class IbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_ib_environment();
    mock_ = std::make_unique<MockVerbs>();
    add_devices();
  }
  void TearDown() override {
    EXPECT_EQ(mock_->live_objects(), 0u) << "verbs objects leaked";
    mock_.reset();
    if (!sysfs_.empty()) std::filesystem::remove_all(sysfs_);
    ib::set_ib_sysfs_root_for_tests("");
    reset_ib_environment();
  }
  virtual void add_devices() {
    MockPort port;
    port.lid = 7;
    mock_->add_device(MockDevice{"mlx5_0", {port}});
  }
  // A fake sysfs for the configured devices, used by the transport from now on.
  void use_fake_sysfs() {
    if (!sysfs_.empty()) return;
    sysfs_ = std::filesystem::temp_directory_path() /
             ("ccl-ib-sysfs-" + std::to_string(getpid()) + "-" + unique_tag("s"));
    mock_->write_sysfs(sysfs_.string());
    ib::set_ib_sysfs_root_for_tests(sysfs_.string());
  }

  std::unique_ptr<MockVerbs> mock_;
  std::filesystem::path sysfs_;
};

}  // namespace ccl::transport::ib_test
