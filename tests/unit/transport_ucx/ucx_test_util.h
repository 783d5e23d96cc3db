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

// Byte i of message `seed`: periodic in no power of two, so a chunk at a wrong offset shows.
inline std::byte pattern(uint32_t seed, size_t i) {
  const uint32_t x = static_cast<uint32_t>(i) * 2246822519u + seed * 3266489917u +
                     static_cast<uint32_t>(i >> 13) * 668265263u;
  return static_cast<std::byte>((x >> 23) ^ (x >> 7));
}
inline std::vector<std::byte> make_message(uint32_t seed, size_t bytes) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = pattern(seed, i);
  return v;
}
inline long first_mismatch(const std::byte* got, size_t bytes, uint32_t seed) {
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != pattern(seed, i)) return static_cast<long>(i);
  }
  return -1;
}
inline long first_mismatch(const std::vector<std::byte>& got, uint32_t seed) {
  return first_mismatch(got.data(), got.size(), seed);
}

enum class SinkKind { Copy, AlignCheck, Direct };

// Copy: copies pieces. AlignCheck: also checks the kPieceAlign rule and that pieces come in
// order without gaps. Direct: offers its buffer (at `direct` when given, else its own) and
// counts the pieces it should not get.
class TestSink : public RecvSink {
 public:
  TestSink(SinkKind kind, size_t bytes, std::byte* direct = nullptr)
      : kind(kind), data(bytes, std::byte{0xee}), direct_(direct) {}
  void consume(const std::byte* piece, size_t offset, size_t len) override {
    ++pieces;
    if (offset + len > data.size()) {
      errors.push_back("piece past the end at " + std::to_string(offset));
      return;
    }
    if (kind == SinkKind::AlignCheck) {
      if (offset != next_offset_) errors.push_back("gap or overlap at " + std::to_string(offset));
      if (offset % kPieceAlign != 0) errors.push_back("unaligned offset " + std::to_string(offset));
      if (len % kPieceAlign != 0 && offset + len != data.size()) {
        errors.push_back("unaligned length " + std::to_string(len));
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
  const std::byte* received() const { return direct_ != nullptr ? direct_ : data.data(); }

  SinkKind kind;
  std::vector<std::byte> data;
  size_t pieces = 0;
  std::vector<std::string> errors;

 private:
  std::byte* direct_;
  size_t next_offset_ = 0;
};

// Progresses `conns` until done() or the timeout (false; no gtest, for forked children too).
// Exceptions propagate.
inline bool drive_until(Transport& transport, const std::vector<Connection*>& conns,
                        const std::function<bool()>& done,
                        std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  const Deadline deadline = Deadline::after(timeout);
  for (;;) {
    bool moved = false;
    for (Connection* c : conns) moved |= c->progress();
    if (done()) return true;
    if (deadline.expired()) return false;
    if (!moved) transport.wait(std::chrono::milliseconds(20));
  }
}
inline void drive(Transport& transport, const std::vector<Connection*>& conns,
                  const std::function<bool()>& done,
                  std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  if (!drive_until(transport, conns, done, timeout)) ADD_FAILURE() << "drive() timed out";
}

// Runs fn(rank) on `nranks` threads; an exception in a rank fails the test with its message.
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

// Every rank of a full mesh in this process, each made and connected on its own thread.
struct Mesh {
  InMemoryStore store;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::vector<Connection*>> conns;  // conns[rank][peer], nullptr for itself

  explicit Mesh(int nranks, ucx::UcxOptions options = {},
                const std::string& tag = unique_tag("mesh")) {
    transports.resize(nranks);
    conns.assign(nranks, std::vector<Connection*>(nranks, nullptr));
    run_ranks(nranks, [&](int rank) {
      SetupContext ctx = make_context(rank, nranks, tag, &store);
      auto t = ucx::make_ucx_transport(ctx, options);
      std::vector<int> peers;
      for (int p = 0; p < nranks; ++p) {
        if (p != rank) peers.push_back(p);
      }
      auto list = t->connect(ctx, peers);
      for (size_t i = 0; i < peers.size(); ++i) conns[rank][peers[i]] = list[i];
      transports[rank] = std::move(t);
    });
  }
  bool ok() const {
    for (const auto& t : transports) {
      if (!t) return false;
    }
    return true;
  }
  Connection* conn(int rank, int peer) const { return conns[rank][peer]; }
  std::vector<Connection*> peers_of(int rank) const {
    std::vector<Connection*> v;
    for (Connection* c : conns[rank]) {
      if (c != nullptr) v.push_back(c);
    }
    return v;
  }
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
