// Shared helpers of the tcp transport tests: ranks as threads over one InMemoryStore, sinks of
// each kind, a progress loop with a deadline and byte patterns that catch misplaced bytes.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../support/transport_test_sinks.h"
#include "base/config.h"
#include "base/error.h"
#include "core/bootstrap/store.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

namespace ccl::transport::tcp_test {

inline void use_loopback() { setenv("CCL_SOCKET_IFNAME", "lo", 1); }

using transport_test::drive_until_error;
using transport_test::expect_error;
using transport_test::first_mismatch;
using transport_test::make_context;
using transport_test::make_message;
using transport_test::pattern;
using transport_test::run_ranks;
using transport_test::SinkKind;
using transport_test::unique_tag;

// The sockets per peer the transport made now would use (CCL_SOCKET_NTHREADS and
// CCL_NSOCKS_PERTHREAD, tcp_multi_connection.h).
inline int64_t sockets_per_peer() {
  return config_int("CCL_SOCKET_NTHREADS") * config_int("CCL_NSOCKS_PERTHREAD");
}

// A socket configuration a test runs under: set in the environment while it lives (the transport
// reads it when made), unset afterwards, so that other tests get the default (one socket).
struct SocketConfig {
  int threads = 1;
  int per_thread = 1;
  std::string name() const { return std::to_string(threads) + "x" + std::to_string(per_thread); }
};
class ScopedSocketConfig {
 public:
  explicit ScopedSocketConfig(const SocketConfig& c) {
    setenv("CCL_SOCKET_NTHREADS", std::to_string(c.threads).c_str(), 1);
    setenv("CCL_NSOCKS_PERTHREAD", std::to_string(c.per_thread).c_str(), 1);
  }
  ~ScopedSocketConfig() {
    unsetenv("CCL_SOCKET_NTHREADS");
    unsetenv("CCL_NSOCKS_PERTHREAD");
  }
  ScopedSocketConfig(const ScopedSocketConfig&) = delete;
  ScopedSocketConfig& operator=(const ScopedSocketConfig&) = delete;
};
// The configurations the data tests run under: one socket, four driven by the caller, and two
// helper threads of two sockets each.
inline const SocketConfig kSocketConfigs[] = {{1, 1}, {1, 4}, {2, 2}};

// A test run under the socket configuration it is given: over loopback, with the configuration
// set while the test runs.
class SocketConfigTest : public ::testing::TestWithParam<SocketConfig> {
 protected:
  void SetUp() override {
    use_loopback();
    config_.emplace(GetParam());
  }
  void TearDown() override { config_.reset(); }
  std::optional<ScopedSocketConfig> config_;
};

inline const char* sink_name(SinkKind k) {
  return k == SinkKind::Copy ? "copy" : k == SinkKind::AlignCheck ? "align" : "direct";
}

// transport_test::TestSink, whose AlignCheck expects pieces in order without gaps only over one
// socket (several deliver their chunks side by side, which the contract allows).
class TestSink : public transport_test::TestSink {
 public:
  TestSink(SinkKind kind, size_t bytes)
      : transport_test::TestSink(kind, bytes, nullptr, sockets_per_peer() == 1) {}
};

// Progresses `conns` until done() or the deadline (then the test fails). Exceptions propagate.
inline bool drive(Transport& transport, const std::vector<Connection*>& conns,
                  const std::function<bool()>& done,
                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  return transport_test::drive(transport, conns, done, timeout);
}

// All ranks of a full mesh, each made and connected on its own thread.
struct Mesh : transport_test::MeshConnections {
  static Mesh make(int nranks, InMemoryStore& store, const std::string& tag) {
    Mesh m;
    m.resize(nranks);
    run_ranks(nranks, [&](int rank) {
      SetupContext ctx = make_context(rank, nranks, tag, &store);
      m.connect_rank(ctx, make_tcp_transport(ctx));
    });
    return m;
  }
};

}  // namespace ccl::transport::tcp_test
