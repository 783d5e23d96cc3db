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
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "core/bootstrap/store.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

namespace ccl::transport::tcp_test {

inline void use_loopback() { setenv("CCL_SOCKET_IFNAME", "lo", 1); }

// A tag no other test (or process) uses, so that store keys never collide.
inline std::string unique_tag(const char* what) {
  static std::atomic<int> counter{0};
  return std::string(what) + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

inline SetupContext make_context(int rank, int nranks, const std::string& tag, Store* store,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                 const AbortFlag* abort = nullptr) {
  SetupContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.comm_tag = tag;
  ctx.store = store;
  ctx.peers.resize(nranks);
  for (int r = 0; r < nranks; ++r) ctx.peers[r].rank = r;
  ctx.deadline = Deadline::after(timeout);
  ctx.abort = abort;
  return ctx;
}

// Byte i of message `seed`: not periodic in 64 or 256, so a misplaced piece shows.
inline std::byte pattern(uint32_t seed, size_t i) {
  uint32_t x =
      static_cast<uint32_t>(i) * 2654435761u + seed * 40503u + static_cast<uint32_t>(i >> 12);
  return static_cast<std::byte>(x >> 24);
}
inline std::vector<std::byte> make_message(uint32_t seed, size_t bytes) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = pattern(seed, i);
  return v;
}
// Index of the first wrong byte, or -1.
inline long first_mismatch(const std::vector<std::byte>& got, uint32_t seed) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != pattern(seed, i)) return static_cast<long>(i);
  }
  return -1;
}

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

enum class SinkKind { Copy, AlignCheck, Direct };
inline const char* sink_name(SinkKind k) {
  return k == SinkKind::Copy ? "copy" : k == SinkKind::AlignCheck ? "align" : "direct";
}

// Copies pieces into `data`; AlignCheck also verifies the kPieceAlign rule, that no piece
// overlaps another and, over one socket, that they come in order without gaps (several sockets
// deliver their chunks side by side, which the contract allows; a gap then shows as a byte the
// pattern check finds wrong); Direct offers its buffer and counts consume() calls it should not
// get.
class TestSink : public RecvSink {
 public:
  TestSink(SinkKind kind, size_t bytes)
      : kind_(kind),
        data(bytes, std::byte{0xee}),
        ordered_(sockets_per_peer() == 1),
        seen_(bytes / kPieceAlign + 1, false) {}
  void consume(const std::byte* piece, size_t offset, size_t len) override {
    ++pieces;
    if (offset + len > data.size()) {
      errors.push_back("piece past the end at " + std::to_string(offset));
      return;
    }
    if (kind_ == SinkKind::AlignCheck) {
      if (ordered_ && offset != next_offset_) {
        errors.push_back("gap or overlap at " + std::to_string(offset));
      }
      for (size_t b = offset / kPieceAlign; b * kPieceAlign < offset + len; ++b) {
        if (seen_[b]) errors.push_back("overlap at " + std::to_string(b * kPieceAlign));
        seen_[b] = true;
      }
      if (offset % kPieceAlign != 0) errors.push_back("unaligned offset " + std::to_string(offset));
      if (len % kPieceAlign != 0 && offset + len != data.size()) {
        errors.push_back("unaligned length " + std::to_string(len) + " at " +
                         std::to_string(offset));
      }
      if (len == 0) errors.push_back("empty piece");
    }
    next_offset_ = offset + len;
    std::memcpy(data.data() + offset, piece, len);
  }
  std::byte* direct_destination() override {
    return kind_ == SinkKind::Direct && !data.empty() ? data.data() : nullptr;
  }

  SinkKind kind_;
  std::vector<std::byte> data;
  size_t pieces = 0;
  std::vector<std::string> errors;

 private:
  bool ordered_;
  std::vector<bool> seen_;  // per kPieceAlign block
  size_t next_offset_ = 0;
};

// Progresses `conns` until done() or the deadline (then the test fails). Exceptions propagate.
inline bool drive(Transport& transport, const std::vector<Connection*>& conns,
                  const std::function<bool()>& done,
                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  Deadline deadline = Deadline::after(timeout);
  for (;;) {
    bool moved = false;
    for (Connection* c : conns) moved |= c->progress();
    if (done()) return true;
    if (deadline.expired()) {
      ADD_FAILURE() << "drive() timed out";
      return false;
    }
    if (!moved) transport.wait(std::chrono::milliseconds(20));
  }
}

// Runs fn(rank) on `nranks` threads; an exception in any rank fails the test with its message.
inline void run_ranks(int nranks, const std::function<void(int)>& fn) {
  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// All ranks of a full mesh, each made and connected on its own thread.
struct Mesh {
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::vector<Connection*>> conns;  // conns[rank][peer], nullptr for itself

  static Mesh make(int nranks, InMemoryStore& store, const std::string& tag) {
    Mesh m;
    m.transports.resize(nranks);
    m.conns.assign(nranks, std::vector<Connection*>(nranks, nullptr));
    run_ranks(nranks, [&](int rank) {
      SetupContext ctx = make_context(rank, nranks, tag, &store);
      auto t = make_tcp_transport(ctx);
      std::vector<int> peers;
      for (int p = 0; p < nranks; ++p) {
        if (p != rank) peers.push_back(p);
      }
      auto list = t->connect(ctx, peers);
      for (size_t i = 0; i < peers.size(); ++i) m.conns[rank][peers[i]] = list[i];
      m.transports[rank] = std::move(t);
    });
    return m;
  }
  std::vector<Connection*> peers_of(int rank) const {
    std::vector<Connection*> v;
    for (Connection* c : conns[rank]) {
      if (c != nullptr) v.push_back(c);
    }
    return v;
  }
};

}  // namespace ccl::transport::tcp_test
