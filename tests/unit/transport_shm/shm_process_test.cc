// The shm transport between real processes (fork): the matrix, and peers that die.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "shm_harness.h"

namespace ccl::test {
namespace {

using namespace std::chrono_literals;
using transport::RecvRequest;
using transport::SendRequest;
using Clock = std::chrono::steady_clock;

void expect_all_ok(const std::vector<std::string>& errors) {
  for (size_t i = 0; i < errors.size(); ++i) EXPECT_EQ(errors[i], "") << "rank " << i;
}

HarnessOptions ring(size_t slots, size_t slot_bytes) {
  HarnessOptions options;
  options.shm = transport::ShmOptions{};
  options.shm->slots = slots;
  options.shm->slot_bytes = slot_bytes;
  return options;
}

// Forks a child that runs `body` and exits with 0 if it returned, 1 if it threw.
int fork_child(const std::function<void()>& body) {
  fflush(nullptr);
  int pid = fork();
  if (pid == 0) {
    int code = 0;
    try {
      body();
    } catch (const std::exception& e) {
      fprintf(stderr, "child %d: %s\n", getpid(), e.what());
      code = 1;
    }
    _exit(code);
  }
  return pid;
}

TEST(ShmProcesses, MatrixTwoRanks) {
  size_t s = transport::shm_options_from_config().slot_bytes;
  expect_all_ok(run_shm_processes(2, {}, [&](RankEnv& env) {
    exchange_matrix(*env.transport, env.by_peer, env.rank, env.nranks, matrix_sizes(s),
                    env.deadline);
  }));
}

TEST(ShmProcesses, MatrixFourRanks) {
  size_t s = transport::shm_options_from_config().slot_bytes;
  expect_all_ok(run_shm_processes(4, {}, [&](RankEnv& env) {
    exchange_matrix(*env.transport, env.by_peer, env.rank, env.nranks, matrix_sizes(s),
                    env.deadline);
  }));
}

// The parent waits on a receive (or a send into a full ring) from a child that is SIGKILLed:
// the wait must end in RemoteError well before any timeout, and nothing stays in /dev/shm.
void killed_peer(bool parent_sends) {
  std::string tag = unique_tag();
  FileStore store;
  HarnessOptions options = ring(4, 16384);
  int child = fork_child([&] {
    ConnectedRank me = connect_rank(store, tag, 1, 2, options, Deadline::after(10s));
    store.set("child-connected", Bytes{1});
    std::this_thread::sleep_for(30s);  // until killed
  });
  ASSERT_GT(child, 0);
  ConnectedRank me = connect_rank(store, tag, 0, 2, options, Deadline::after(10s));
  store.get("child-connected", Deadline::after(10s));
  EXPECT_TRUE(shm_files_of(tag).empty());

  constexpr size_t kBytes = 1 << 20;  // more than the ring
  std::vector<std::byte> data(kBytes);
  CopySink sink(data.data(), kBytes);
  RecvRequest recv{kBytes, &sink};
  SendRequest send{data.data(), kBytes};
  if (parent_sends) {
    me.by_peer[1]->post_send(&send);
  } else {
    me.by_peer[1]->post_recv(&recv);
  }
  std::atomic<int64_t> killed_at{0};
  std::thread killer([&] {
    std::this_thread::sleep_for(200ms);
    killed_at = Clock::now().time_since_epoch().count();
    kill(child, SIGKILL);
  });
  cclResult_t code = cclSuccess;
  std::string message;
  try {
    drive(
        *me.transport, me.by_peer, [&] { return send.complete || recv.complete; },
        Deadline::after(10s), 10s);
  } catch (const Error& e) {
    code = e.code();
    message = e.what();
  }
  auto detected = Clock::now();
  killer.join();
  auto latency = detected - Clock::time_point(Clock::duration(killed_at.load()));
  EXPECT_EQ(code, cclRemoteError) << message;
  EXPECT_EQ(message, "rank 1 (pid " + std::to_string(child) + ") exited");
  EXPECT_LT(latency, 1s) << "detected after "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(latency).count()
                         << " ms";
  int status = wait_child(child, 10s);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  me = ConnectedRank();
  EXPECT_TRUE(shm_files_of(tag).empty());
}

TEST(ShmProcesses, KilledPeerWhileReceiving) { killed_peer(false); }
TEST(ShmProcesses, KilledPeerWhileSending) { killed_peer(true); }

// What a peer wrote before it exited is still delivered; only then does its absence count.
TEST(ShmProcesses, DataFromExitedPeerIsDrained) {
  std::string tag = unique_tag();
  FileStore store;
  HarnessOptions options = ring(8, 16384);
  constexpr size_t kFirst = 5 * 16384 + 3;  // fits in the ring
  constexpr size_t kSecond = 100;
  int child = fork_child([&] {
    ConnectedRank me = connect_rank(store, tag, 1, 2, options, Deadline::after(10s));
    std::vector<std::byte> a(kFirst), b(kSecond);
    fill_pattern(a.data(), kFirst, 1, 0, 0);
    fill_pattern(b.data(), kSecond, 1, 0, 1);
    SendRequest first{a.data(), kFirst}, second{b.data(), kSecond};
    me.by_peer[0]->post_send(&first);
    me.by_peer[0]->post_send(&second);
    drive(
        *me.transport, me.by_peer, [&] { return second.complete; }, Deadline::after(10s));
    _exit(0);  // abruptly: no destructors
  });
  ASSERT_GT(child, 0);
  ConnectedRank me = connect_rank(store, tag, 0, 2, options, Deadline::after(10s));
  int status = wait_child(child, 10s);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  VerifySink first_sink(kFirst, 1, 0, 0), second_sink(kSecond, 1, 0, 1);
  RecvRequest first{kFirst, &first_sink}, second{kSecond, &second_sink};
  me.by_peer[1]->post_recv(&first);
  me.by_peer[1]->post_recv(&second);
  drive(
      *me.transport, me.by_peer, [&] { return second.complete; }, Deadline::after(10s));
  EXPECT_EQ(first_sink.result(), "");
  EXPECT_EQ(second_sink.result(), "");

  std::byte byte;
  CopySink third_sink(&byte, 1);
  RecvRequest third{1, &third_sink};
  me.by_peer[1]->post_recv(&third);
  auto start = Clock::now();
  cclResult_t code = cclSuccess;
  try {
    drive(
        *me.transport, me.by_peer, [&] { return third.complete; }, Deadline::after(10s), 10s);
  } catch (const Error& e) {
    code = e.code();
  }
  EXPECT_EQ(code, cclRemoteError);
  EXPECT_LT(Clock::now() - start, 1s);
  me = ConnectedRank();
  EXPECT_TRUE(shm_files_of(tag).empty());
}

// A peer killed in the middle of connect() never removes its segment; the survivors' failing
// connect() removes it for it.
TEST(ShmProcesses, PeerKilledDuringConnectLeavesNothing) {
  std::string tag = unique_tag();
  FileStore store;
  HarnessOptions options = ring(2, 4096);
  int child = fork_child([&] {
    // Rank 1 of 3 also expects rank 2, which never comes: it blocks in connect().
    connect_rank(store, tag, 1, 3, options, Deadline::after(30s));
  });
  ASSERT_GT(child, 0);
  std::string child_segment = "ccl-" + tag + "-1";
  auto until = Clock::now() + 10s;
  while (shm_files_of(tag).empty() && Clock::now() < until) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(shm_files_of(tag), std::vector<std::string>{child_segment});
  kill(child, SIGKILL);
  wait_child(child, 10s);

  transport::SetupContext ctx;
  ctx.rank = 0;
  ctx.nranks = 3;
  ctx.comm_tag = tag;
  ctx.store = &store;
  ctx.deadline = Deadline::after(500ms);
  ctx.peers.resize(3);
  ctx.peers[1].pid = child;  // the child may die before it publishes its own pid
  auto shm = transport::make_shm_transport(ctx, *options.shm);
  int peer = 1;
  cclResult_t code = cclSuccess;
  try {
    shm->connect(ctx, std::span<const int>(&peer, 1));
  } catch (const Error& e) {
    code = e.code();
  }
  EXPECT_EQ(code, cclTimeout);
  EXPECT_TRUE(shm_files_of(tag).empty());
}

}  // namespace
}  // namespace ccl::test
