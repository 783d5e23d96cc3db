// Helpers of the ucx transport tests: UCX_TLS per test group, ranks as threads over one
// InMemoryStore, sinks of each kind, a bounded progress loop and byte patterns in which a
// misplaced piece shows.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/transport_test_sinks.h"
#include "base/error.h"
#include "core/bootstrap/store.h"
#include "transport/registered_region.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_options.h"
#include "transport/ucx/ucx_transport.h"

namespace ccl::transport::ucx_test {

// The UCX_TLS values the tests run under: tcp alone, and UCX's default (all it finds: here tcp,
// posix, sysv, cma). UCX 1.13 makes no UCP_ERR_HANDLING_MODE_PEER endpoint over posix or sysv
// ("no peer failure handler") and carries no messages over cma alone ("no am bcopy"), so on this
// host every endpoint ends up on tcp either way (its ep_cfg: tag(tcp/lo) rma_am(tcp/lo)
// ka(tcp/lo)); the default still checks that UCX's choice among more transports works.
// UCX reads UCX_TLS when a context is made, so a test sets it first. nullptr: unset.
inline constexpr const char* kTcpOnly = "tcp";
inline constexpr const char* kDefaultTls = nullptr;
inline void use_tls(const char* tls) {
  if (tls == nullptr) {
    unsetenv("UCX_TLS");
  } else {
    setenv("UCX_TLS", tls, 1);
  }
}
inline std::string tls_name(const char* tls) { return tls == nullptr ? "default" : tls; }

using transport_test::expect_error;
using transport_test::make_context;
using transport_test::run_ranks;
using transport_test::SinkKind;
using transport_test::TestSink;
using transport_test::unique_tag;

// Byte i of message `seed`: periodic in no power of two, so a chunk at a wrong offset shows.
inline std::byte pattern(uint32_t seed, size_t i) {
  const uint32_t x = static_cast<uint32_t>(i) * 2246822519u + seed * 3266489917u +
                     static_cast<uint32_t>(i >> 13) * 668265263u;
  return static_cast<std::byte>((x >> 23) ^ (x >> 7));
}
inline std::vector<std::byte> make_message(uint32_t seed, size_t bytes) {
  return transport_test::make_message(seed, bytes, pattern);
}
inline long first_mismatch(const std::byte* got, size_t bytes, uint32_t seed) {
  return transport_test::first_mismatch(got, bytes, seed, pattern);
}
inline long first_mismatch(const std::vector<std::byte>& got, uint32_t seed) {
  return transport_test::first_mismatch(got, seed, pattern);
}

// Progresses `conns` until done() or the timeout (false; no gtest, for forked children too).
// Exceptions propagate.
inline bool drive_until(Transport& transport, const std::vector<Connection*>& conns,
                        const std::function<bool()>& done,
                        std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  return transport_test::drive_until(transport, conns, done, timeout);
}
inline void drive(Transport& transport, const std::vector<Connection*>& conns,
                  const std::function<bool()>& done,
                  std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  transport_test::drive(transport, conns, done, timeout);
}

// Every rank of a full mesh in this process, each made and connected on its own thread.
struct Mesh : transport_test::MeshConnections {
  InMemoryStore store;

  explicit Mesh(int nranks, ucx::UcxOptions options = {},
                const std::string& tag = unique_tag("mesh")) {
    resize(nranks);
    run_ranks(nranks, [&](int rank) {
      SetupContext ctx = make_context(rank, nranks, tag, &store);
      connect_rank(ctx, ucx::make_ucx_transport(ctx, options));
    });
  }
  // The transports go before the store they were set up through (a base outlives members).
  ~Mesh() { transports.clear(); }
  bool ok() const {
    for (const auto& t : transports) {
      if (!t) return false;
    }
    return true;
  }
  Connection* conn(int rank, int peer) const { return conns[rank][peer]; }
  // Progresses every rank from this thread until done() (the ranks' transports are distinct
  // workers, so one thread may drive them all in turn).
  bool drive_all(const std::function<bool()>& done,
                 std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    const Deadline deadline = Deadline::after(timeout);
    while (!done()) {
      if (deadline.expired()) {
        ADD_FAILURE() << "drive_all() timed out";
        return false;
      }
      bool moved = false;
      for (size_t r = 0; r < conns.size(); ++r) {
        for (Connection* c : conns[r]) {
          if (c != nullptr) moved |= c->progress();
        }
      }
      if (!moved) std::this_thread::yield();
    }
    return true;
  }
};

inline const ucx::ConnectionStats& stats_of(Connection* c) {
  return dynamic_cast<ucx::UcxConnection&>(*c).stats();
}

// A page-aligned buffer registered with a transport as the communicator's cache would.
class RegisteredBuffer {
 public:
  RegisteredBuffer(Transport& transport, size_t bytes, uint64_t id)
      : transport_(transport), bytes_(bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    storage_ = static_cast<std::byte*>(std::aligned_alloc(page, (bytes + page - 1) / page * page));
    std::memset(storage_, 0xcd, bytes);
    region_.id = id;
    region_.owner_pid = getpid();
    page_span(storage_, bytes, &region_.base, &region_.bytes);
    transport_.register_memory(region_);
  }
  ~RegisteredBuffer() {
    transport_.deregister_memory(region_);
    std::free(storage_);
  }
  std::byte* data() { return storage_; }
  size_t size() const { return bytes_; }
  const RegisteredRegion* region() const { return &region_; }

 private:
  Transport& transport_;
  size_t bytes_;
  std::byte* storage_;
  RegisteredRegion region_;
};

}  // namespace ccl::transport::ucx_test
