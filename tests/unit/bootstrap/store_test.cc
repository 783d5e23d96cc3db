// The Store contract, run against InMemoryStore (threads share one store) and TcpStore (each
// "rank" thread has its own connection to one StoreServer).
#include "core/bootstrap/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <numeric>
#include <thread>

#include "core/bootstrap/tcp_store.h"
#include "base/error.h"

namespace ccl {
namespace {

using std::chrono::milliseconds;
constexpr int kRanks = 8;

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "tcp") {
      secret_ = random_secret();
      server_ = StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret_,
                                   std::chrono::seconds(30));
      for (int r = 0; r < kRanks; ++r) {
        tcp_.push_back(TcpStore::connect(server_->address(), secret_, r, kRanks,
                                         Deadline::after(milliseconds(5000)), nullptr));
      }
    }
  }
  void TearDown() override {
    tcp_.clear();
    if (server_) {
      server_->wait_finished(Deadline::after(milliseconds(5000)));
      EXPECT_TRUE(server_->finished()) << "server still running after every rank left";
    }
  }
  Store& store(int rank) {
    if (GetParam() == "tcp") return *tcp_[rank];
    return memory_;
  }

  InMemoryStore memory_;
  Secret secret_{};
  std::unique_ptr<StoreServer> server_;
  std::vector<std::unique_ptr<TcpStore>> tcp_;
};

void run_ranks(const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(StoreTest, RanksExchangeKeysCountAndMeetAtBarriers) {
  std::vector<int64_t> tickets(kRanks);
  run_ranks([&](int r) {
    Store& s = store(r);
    s.set("key/" + std::to_string(r), to_bytes("value " + std::to_string(r)));
    std::vector<std::string> all;
    for (int q = 0; q < kRanks; ++q) all.push_back("key/" + std::to_string(q));
    s.wait(all, Deadline::after(milliseconds(5000)));
    for (int q = 0; q < kRanks; ++q) {
      Bytes v = s.get("key/" + std::to_string(q), Deadline::after(milliseconds(5000)));
      if (to_string(v) != "value " + std::to_string(q)) throw std::runtime_error("wrong value");
    }
    tickets[r] = s.add("counter", 1);
    store_barrier(s, "barrier-a", kRanks, Deadline::after(milliseconds(5000)));
    // After the barrier every add has happened.
    Bytes counter = s.get("counter", Deadline::after(milliseconds(5000)));
    int64_t final_count = 0;
    memcpy(&final_count, counter.data(), std::min(counter.size(), sizeof(final_count)));
    if (counter.size() != 8 || final_count != kRanks) throw std::runtime_error("counter");
    store_barrier(s, "barrier-b", kRanks, Deadline::after(milliseconds(5000)));
  });
  std::sort(tickets.begin(), tickets.end());
  std::vector<int64_t> expected(kRanks);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(tickets, expected);
}

TEST_P(StoreTest, GetTimesOutAtTheDeadline) {
  auto t0 = Clock::now();
  try {
    store(0).get("never-set", Deadline::after(milliseconds(300)));
    FAIL() << "get returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout) << e.what();
  }
  double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 1.5);
  // Other ranks are unaffected.
  store(1).set("k", to_bytes("v"));
  EXPECT_EQ(to_string(store(2).get("k", Deadline::after(milliseconds(2000)))), "v");
}

TEST_P(StoreTest, WaitTimesOutAtTheDeadline) {
  store(0).set("here", Bytes{1});
  auto t0 = Clock::now();
  try {
    store(1).wait({"here", "not-here"}, Deadline::after(milliseconds(200)));
    FAIL() << "wait returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.5);
}

TEST_P(StoreTest, GetAndWaitReturnOnceALaterSetArrives) {
  std::atomic<bool> got{false};
  std::string value;
  std::thread waiter([&] {
    store(1).wait({"late", "late", "early"}, Deadline::after(milliseconds(5000)));
    value = to_string(store(1).get("late", Deadline::after(milliseconds(5000))));
    got = true;
  });
  store(2).set("early", Bytes{});
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(got.load());
  store(3).set("late", to_bytes("finally"));
  waiter.join();
  EXPECT_EQ(value, "finally");
  store(4).wait({}, Deadline::after(milliseconds(0)));  // nothing to wait for
}

TEST_P(StoreTest, AddSetAndOverwrite) {
  EXPECT_EQ(store(0).add("n", 5), 5);
  EXPECT_EQ(store(1).add("n", -7), -2);
  EXPECT_EQ(store(2).add("n", 0), -2);
  Bytes raw = store(3).get("n", Deadline::after(milliseconds(1000)));
  ASSERT_EQ(raw.size(), 8u);
  int64_t v = 0;
  memcpy(&v, raw.data(), 8);
  EXPECT_EQ(v, -2);
  Bytes binary = {0, 1, 0, 255, 0};
  store(0).set("bin", binary);
  EXPECT_EQ(store(5).get("bin", Deadline::after(milliseconds(1000))), binary);
  store(0).set("bin", Bytes{7});
  EXPECT_EQ(store(6).get("bin", Deadline::after(milliseconds(1000))), Bytes{7});
  store(0).set("", Bytes{});
  EXPECT_EQ(store(7).get("", Deadline::after(milliseconds(1000))), Bytes{});
}

TEST_P(StoreTest, PrefixStoresDoNotSeeEachOther) {
  PrefixStore a("comm1/", store(0)), b("comm2/", store(1));
  a.set("x", to_bytes("a"));
  b.set("x", to_bytes("b"));
  EXPECT_EQ(to_string(a.get("x", Deadline::after(milliseconds(1000)))), "a");
  EXPECT_EQ(to_string(b.get("x", Deadline::after(milliseconds(1000)))), "b");
  EXPECT_EQ(to_string(store(2).get("comm1/x", Deadline::after(milliseconds(1000)))), "a");
  EXPECT_EQ(a.add("c", 2), 2);
  a.wait({"x", "c"}, Deadline::after(milliseconds(1000)));
  EXPECT_THROW(b.wait({"c"}, Deadline::after(milliseconds(100))), Error);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values("memory", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ccl
