// The recovery plane on its own (src/core/recovery/): the listener files connections by
// communicator and rank and refuses a wrong key; the agreement among ranks as threads of this
// process, with a rank whose endpoint is gone counted as failed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/error.h"
#include "core/recovery/agreement.h"
#include "core/recovery/recovery_listener.h"
#include "core/recovery/recovery_wire.h"

namespace ccl::recovery {
namespace {

CommName name_of(const char* tag) {
  CommName n;
  n.tag = tag;
  n.key = random_secret();
  return n;
}

void send_revoke(const CommName& comm, int to) {
  Socket s = Socket::connect_once(Listener::instance().address(),
                                  Deadline::after(std::chrono::seconds(5)));
  ASSERT_TRUE(s.valid());
  send_hello(s, make_hello(Ask::kRevoke, comm, to, 7, 0), Deadline::after(std::chrono::seconds(5)));
}

bool wait_for(const std::atomic<int>& value, int want) {
  for (int i = 0; i < 500 && value.load() != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return value.load() == want;
}

TEST(RecoveryPlane, ARevokeNeedsTheCommunicatorsKey) {
  const CommName comm = name_of("aaaaaaaaaaaa");
  std::atomic<int> revokes{0}, by{-1};
  Listener::instance().open(comm, 0, [&](int from) {
    by = from;
    ++revokes;
  });
  CommName stranger = comm;
  stranger.key = random_secret();  // knows the tag (it is in /dev/shm), not the key
  send_revoke(stranger, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(revokes.load(), 0);
  send_revoke(comm, 0);
  EXPECT_TRUE(wait_for(revokes, 1));
  EXPECT_EQ(by.load(), 7);
  Listener::instance().close(comm.tag, 0);
  send_revoke(comm, 0);  // after close: ignored
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(revokes.load(), 1);
}

// Ranks 0..n-1 of one communicator as threads; `absent` ranks have no endpoint (never opened, as
// a rank that is gone): the others agree on the AND of their flags and on the absent as failed.
void agree_among(int n, const std::vector<int>& absent) {
  const CommName comm = name_of(n == 3 ? "bbbbbbbbbbbb" : "cccccccccccc");
  std::vector<SocketAddress> listeners(n, Listener::instance().address());
  std::vector<std::shared_ptr<Endpoint>> endpoints(n);
  for (int r = 0; r < n; ++r) {
    if (std::find(absent.begin(), absent.end(), r) == absent.end()) {
      endpoints[r] = Listener::instance().open(comm, r, [](int) {});
    }
  }
  std::vector<Vote> decisions(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (!endpoints[r]) continue;
    threads.emplace_back([&, r] {
      Agreement a;
      a.comm = comm;
      a.self = r;
      a.listeners = listeners;
      a.endpoint = endpoints[r];
      a.seq = 1;
      for (int p = 0; p < n; ++p) a.participants.push_back(p);
      a.deadline = Deadline::after(std::chrono::seconds(20));
      Vote mine;
      mine.flag = 0xff & ~(1 << r);
      try {
        decisions[r] = agree(a, mine, {}, decide_and);
      } catch (const Error& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  int want = 0xff;
  for (int r = 0; r < n; ++r) {
    if (endpoints[r]) want &= ~(1 << r);
  }
  for (int r = 0; r < n; ++r) {
    if (!endpoints[r]) continue;
    EXPECT_EQ(decisions[r].flag, want) << "rank " << r;
    EXPECT_EQ(std::vector<int>(decisions[r].failed.begin(), decisions[r].failed.end()), absent)
        << "rank " << r;
    Listener::instance().close(comm.tag, r);
  }
}

TEST(RecoveryPlane, EveryRankAgreesOnTheAndOfTheFlags) { agree_among(3, {}); }

TEST(RecoveryPlane, AnAbsentCoordinatorAndParticipantCountAsFailed) {
  // Rank 0 (the first coordinator) and rank 3 never open their endpoints.
  agree_among(5, {0, 3});
}

}  // namespace
}  // namespace ccl::recovery
