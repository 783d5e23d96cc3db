#include "shm_harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

namespace ccl::test {

ConnectedRank connect_rank(Store& store, const std::string& tag, int rank, int nranks,
                           const HarnessOptions& options, Deadline deadline) {
  transport::SetupContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.comm_tag = tag;
  ctx.store = &store;
  ctx.deadline = deadline;
  ctx.peers.resize(nranks);
  for (int r = 0; r < nranks; ++r) ctx.peers[r].rank = r;
  ctx.peers[rank].pid = getpid();
  ConnectedRank result;
  result.transport = options.shm ? transport::make_shm_transport(ctx, *options.shm)
                                 : transport::make_shm_transport(ctx);
  std::vector<int> peers;
  for (int r = 0; r < nranks; ++r) {
    if (r != rank) peers.push_back(r);
  }
  std::vector<transport::Connection*> connections = result.transport->connect(ctx, peers);
  require(connections.size() == peers.size(), "connect returned a wrong number of connections");
  result.by_peer.assign(nranks, nullptr);
  for (size_t i = 0; i < peers.size(); ++i) {
    require(connections[i]->peer() == peers[i], "connections not in the order of peers");
    result.by_peer[peers[i]] = connections[i];
  }
  return result;
}

namespace {

std::string leftovers(const std::string& tag, const char* when) {
  std::vector<std::string> files = shm_files_of(tag);
  if (files.empty()) return "";
  std::string text = std::string("/dev/shm not clean ") + when + ":";
  for (const auto& f : files) text += " " + f;
  return text;
}

void run_rank(Store& store, const std::string& tag, int rank, int nranks,
              const HarnessOptions& options, const RankBody& body,
              const std::function<void()>& all_connected) {
  Deadline deadline = Deadline::after(options.timeout);
  ConnectedRank connected = connect_rank(store, tag, rank, nranks, options, deadline);
  all_connected();
  RankEnv env;
  env.rank = rank;
  env.nranks = nranks;
  env.tag = tag;
  env.store = &store;
  env.transport = connected.transport.get();
  env.by_peer = connected.by_peer;
  env.deadline = deadline;
  body(env);
}

}  // namespace

std::vector<std::string> run_shm_threads(int nranks, const HarnessOptions& options,
                                         const RankBody& body) {
  std::string tag = unique_tag();
  InMemoryStore store;
  ThreadBarrier barrier(nranks);
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        run_rank(store, tag, rank, nranks, options, body, [&] {
          barrier.arrive_and_wait(options.timeout);
          if (rank == 0) require(shm_files_of(tag).empty(), leftovers(tag, "after connect"));
        });
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::string left = leftovers(tag, "after teardown");
  if (!left.empty()) errors.push_back(left);
  return errors;
}

int wait_child(int pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    int rc = waitpid(pid, &status, WNOHANG);
    if (rc == pid) return status;
    if (rc < 0) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<std::string> run_shm_processes(int nranks, const HarnessOptions& options,
                                           const RankBody& body) {
  std::string tag = unique_tag();
  FileStore store;
  std::vector<std::string> errors(nranks);
  auto all_connected = [&](int rank) {
    Deadline deadline = Deadline::after(options.timeout);
    store_barrier(store, tag + "/test/connected", nranks, deadline);
    if (rank == 0) require(shm_files_of(tag).empty(), leftovers(tag, "after connect"));
  };
  std::vector<int> children(nranks, -1);
  fflush(nullptr);
  for (int rank = 1; rank < nranks; ++rank) {
    int pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        run_rank(store, tag, rank, nranks, options, body, [&] { all_connected(rank); });
      } catch (const std::exception& e) {
        fprintf(stderr, "rank %d (child %d): %s\n", rank, getpid(), e.what());
        code = 1;
      }
      _exit(code);  // no gtest teardown, no atexit handlers in the child
    }
    children[rank] = pid;
  }
  try {
    run_rank(store, tag, 0, nranks, options, body, [&] { all_connected(0); });
  } catch (const std::exception& e) {
    errors[0] = e.what();
  }
  for (int rank = 1; rank < nranks; ++rank) {
    if (children[rank] < 0) {
      errors[rank] = "fork failed";
      continue;
    }
    int status = wait_child(children[rank], options.timeout);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      errors[rank] = "child failed (status " + std::to_string(status) + "), see its stderr";
    }
  }
  std::string left = leftovers(tag, "after teardown");
  if (!left.empty()) errors.push_back(left);
  return errors;
}

std::vector<size_t> matrix_sizes(size_t s) {
  return {0, 1, 63, 64, 65, s - 1, s, s + 1, 3 * s + 7, size_t{8} << 20};
}

}  // namespace ccl::test
