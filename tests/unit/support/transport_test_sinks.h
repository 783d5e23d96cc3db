// What the network transport tests (transport_tcp, transport_ib, transport_ucx) share: unique
// store tags, a context for a rank of a test communicator, byte patterns that catch misplaced
// bytes, sinks of each kind, bounded progress loops, ranks as threads and a full mesh of them,
// and error expectations. Each transport's test util (tcp_test_util.h, ib_test_util.h,
// ucx_test_util.h) brings these into its own namespace and adds its transport's parts.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "transport/transport.h"

namespace ccl::transport::transport_test {

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
// The pattern a message is made of (a transport's tests may use a pattern of their own).
using Pattern = std::byte (*)(uint32_t seed, size_t i);

inline std::vector<std::byte> make_message(uint32_t seed, size_t bytes, Pattern p = pattern) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = p(seed, i);
  return v;
}
// Index of the first wrong byte, or -1.
inline long first_mismatch(const std::byte* got, size_t bytes, uint32_t seed, Pattern p = pattern) {
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != p(seed, i)) return static_cast<long>(i);
  }
  return -1;
}
inline long first_mismatch(const std::vector<std::byte>& got, uint32_t seed, Pattern p = pattern) {
  return first_mismatch(got.data(), got.size(), seed, p);
}

enum class SinkKind { Copy, AlignCheck, Direct };

// Copy: copies pieces into `data`. AlignCheck: also verifies the kPieceAlign rule, that no piece
// overlaps another and, when `ordered`, that they come in order without gaps (several sockets
// deliver their chunks side by side, which the contract allows; a gap then shows as a byte the
// pattern check finds wrong). Direct: offers its buffer (at `direct` when given, else its own)
// and counts the consume() calls it should not get.
class TestSink : public RecvSink {
 public:
  TestSink(SinkKind kind, size_t bytes, std::byte* direct = nullptr, bool ordered = true)
      : kind(kind),
        data(bytes, std::byte{0xee}),
        direct_(direct),
        ordered_(ordered),
        seen_(bytes / kPieceAlign + 1, false) {}
  void consume(const std::byte* piece, size_t offset, size_t len) override {
    ++pieces;
    if (offset + len > data.size()) {
      errors.push_back("piece past the end at " + std::to_string(offset));
      return;
    }
    if (kind == SinkKind::AlignCheck) {
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
    if (kind != SinkKind::Direct || data.empty()) return nullptr;
    return direct_ != nullptr ? direct_ : data.data();
  }
  // Where the message landed: the direct destination given, else `data`.
  const std::byte* received() const { return direct_ != nullptr ? direct_ : data.data(); }

  SinkKind kind;
  std::vector<std::byte> data;
  size_t pieces = 0;
  std::vector<std::string> errors;

 private:
  std::byte* direct_;
  bool ordered_;
  std::vector<bool> seen_;  // per kPieceAlign block
  size_t next_offset_ = 0;
};

// Progresses `conns` until done() or the timeout (false; no gtest, for forked children too).
// Exceptions propagate.
inline bool drive_until(Transport& transport, const std::vector<Connection*>& conns,
                        const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const Deadline deadline = Deadline::after(timeout);
  for (;;) {
    bool moved = false;
    for (Connection* c : conns) moved |= c->progress();
    if (done()) return true;
    if (deadline.expired()) return false;
    if (!moved) transport.wait(std::chrono::milliseconds(20));
  }
}
// As drive_until; a timeout fails the test.
inline bool drive(Transport& transport, const std::vector<Connection*>& conns,
                  const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  if (drive_until(transport, conns, done, timeout)) return true;
  ADD_FAILURE() << "drive() timed out";
  return false;
}

// Progresses and waits until something throws (the test fails after `timeout`).
inline void drive_until_error(Transport& t, Connection* c,
                              std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  Deadline deadline = Deadline::after(timeout);
  while (!deadline.expired()) {
    c->progress();
    t.wait(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "no error within " << timeout.count() << " ms";
}

// Runs fn(rank) on `nranks` threads, each first calling on_thread_start(rank) when given; an
// exception in any rank fails the test with its message.
inline void run_ranks(int nranks, const std::function<void(int)>& fn,
                      const std::function<void(int)>& on_thread_start = nullptr) {
  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      if (on_thread_start) on_thread_start(r);
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

// The ranks of a full mesh in this process.
struct MeshConnections {
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::vector<Connection*>> conns;  // conns[rank][peer], nullptr for itself

  void resize(int nranks) {
    transports.resize(nranks);
    conns.assign(nranks, std::vector<Connection*>(nranks, nullptr));
  }
  // Connects rank ctx.rank's `transport` to every other rank (collective: each rank on its own
  // thread) and keeps it.
  void connect_rank(const SetupContext& ctx, std::unique_ptr<Transport> transport) {
    std::vector<int> peers;
    for (int p = 0; p < ctx.nranks; ++p) {
      if (p != ctx.rank) peers.push_back(p);
    }
    auto list = transport->connect(ctx, peers);
    for (size_t i = 0; i < peers.size(); ++i) conns[ctx.rank][peers[i]] = list[i];
    transports[ctx.rank] = std::move(transport);
  }
  std::vector<Connection*> peers_of(int rank) const {
    std::vector<Connection*> v;
    for (Connection* c : conns[rank]) {
      if (c != nullptr) v.push_back(c);
    }
    return v;
  }
};

// Expects fn() to throw ccl::Error with `code` and a message containing `text` (and, unless
// `culprit` is -2, blaming `culprit`).
template <class F>
void expect_error(F&& fn, cclResult_t code, const std::string& text, int culprit = -2) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    if (culprit != -2) {
      EXPECT_EQ(e.culprit(), culprit) << e.what();
    }
  }
}

}  // namespace ccl::transport::transport_test
