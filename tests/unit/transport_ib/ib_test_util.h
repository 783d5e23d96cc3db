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
  for (int r = 0; r < nranks; ++r) {
    ctx.peers[r].rank = r;
    ctx.peers[r].host_id = "host" + std::to_string(r);
  }
  ctx.deadline = Deadline::after(timeout);
  ctx.abort = abort;
  return ctx;
}

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
inline long first_mismatch(const std::vector<std::byte>& got, uint32_t seed) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != pattern(seed, i)) return static_cast<long>(i);
  }
  return -1;
}

enum class SinkKind { Copy, AlignCheck, Direct };

// Copy: takes pieces; AlignCheck: also checks the kPieceAlign rule and order; Direct: offers
// its buffer (and counts the consume() calls it should not get).
class TestSink : public RecvSink {
 public:
  TestSink(SinkKind kind, size_t bytes) : kind_(kind), data(bytes, std::byte{0xee}) {}
  void consume(const std::byte* piece, size_t offset, size_t len) override {
    ++pieces;
    if (offset + len > data.size()) {
      errors.push_back("piece past the end at " + std::to_string(offset));
      return;
    }
    if (kind_ == SinkKind::AlignCheck) {
      if (offset != next_offset_) errors.push_back("gap or overlap at " + std::to_string(offset));
      if (offset % kPieceAlign != 0) errors.push_back("unaligned offset " + std::to_string(offset));
      if (len % kPieceAlign != 0 && offset + len != data.size())
        errors.push_back("unaligned length " + std::to_string(len));
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
  size_t next_offset_ = 0;
};

inline bool drive(Transport& transport, const std::vector<Connection*>& conns,
                  const std::function<bool()>& done,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
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

// Runs fn(rank) on `nranks` threads, each its own mock process; an exception fails the test.
inline void run_ranks(int nranks, const std::function<void(int)>& fn) {
  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      MockVerbs::set_thread_process(r);
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

struct Mesh {
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::vector<Connection*>> conns;  // conns[rank][peer]

  static Mesh make(int nranks, InMemoryStore& store, const std::string& tag,
                   const AbortFlag* abort = nullptr) {
    Mesh m;
    m.transports.resize(nranks);
    m.conns.assign(nranks, std::vector<Connection*>(nranks, nullptr));
    run_ranks(nranks, [&](int rank) {
      SetupContext ctx = make_context(rank, nranks, tag, &store, std::chrono::seconds(10), abort);
      auto t = make_ib_transport(ctx);
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
};

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
