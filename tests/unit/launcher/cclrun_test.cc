// cclrun, run as a real program on /bin/sh snippets: the environment each rank gets, exit status
// propagation, the grace period, --timeout, --tag-output, the listening socket for rank 0, signal
// forwarding, replacements of failed ranks (--restart-failed), and that no process outlives a run.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A unique token to find our processes by: a `sleep` duration such as 30.0123405 is a valid
// argument that no other process on the machine will have.
std::string marker() {
  static int counter = 0;
  return "30.0" + std::to_string(getpid()) + "0" + std::to_string(++counter);
}

// Processes whose command line has `token` as one of its arguments.
std::vector<pid_t> processes_with(const std::string& token) {
  std::vector<pid_t> found;
  DIR* dir = opendir("/proc");
  while (dirent* e = readdir(dir)) {
    pid_t pid = atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline");
    std::string arg;
    while (std::getline(f, arg, '\0')) {
      if (arg == token) {
        found.push_back(pid);
        break;
      }
    }
  }
  closedir(dir);
  return found;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// One cclrun process with its stdout and stderr captured.
class Cclrun {
 public:
  explicit Cclrun(const std::vector<std::string>& args) {
    int out[2], err[2];
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(err, O_CLOEXEC), 0);
    std::vector<std::string> argv_strings = {CCLRUN_PATH};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    start_ = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      dup2(err[1], 2);
      execv(argv[0], argv.data());
      _exit(99);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~Cclrun() {
    if (pid_ > 0) {  // the test failed midway: do not leave cclrun behind
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  // Reads output until stdout has `count` lines containing `text`, or `limit` seconds pass.
  bool wait_for_lines(const std::string& text, int count, double limit) {
    auto until = Clock::now() + std::chrono::duration<double>(limit);
    while (Clock::now() < until) {
      int n = 0;
      for (const auto& l : lines(out_)) n += l.find(text) != std::string::npos ? 1 : 0;
      if (n >= count) return true;
      pump(50);
    }
    return false;
  }

  // Waits (at most `limit` seconds) for cclrun to exit and its output to end; returns its exit
  // status (1000 + S if killed by signal S), or -1 if it did not exit in time.
  int finish(double limit = 20) {
    auto until = Clock::now() + std::chrono::duration<double>(limit);
    int status = 0;
    bool exited = false;
    while (true) {
      if (!exited && waitpid(pid_, &status, WNOHANG) == pid_) {
        exited = true;
        elapsed_ = seconds_since(start_);
      }
      if (exited && out_fd_ < 0 && err_fd_ < 0) break;
      if (Clock::now() >= until) break;
      if (out_fd_ >= 0 || err_fd_ >= 0) {
        pump(20);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (!exited) {
      ADD_FAILURE() << "cclrun did not exit within " << limit << " s";
      return -1;
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  }

  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }
  double elapsed() const { return elapsed_; }

 private:
  void pump(int ms) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    if (poll(fds, 2, ms) <= 0) return;
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? out_fd_ : err_fd_;
      if (fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n > 0) {
        (i == 0 ? out_ : err_).append(buf, n);
      } else {
        close(fd);
        fd = -1;
      }
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  std::string out_, err_;
  Clock::time_point start_;
  double elapsed_ = 0;
};

// Runs cclrun to completion.
struct Result {
  int status;
  std::string out, err;
  double seconds;
};
Result run(const std::vector<std::string>& args) {
  Cclrun c(args);
  int status = c.finish();
  return {status, c.out(), c.err(), c.elapsed()};
}

TEST(Cclrun, EnvironmentOfEachRank) {
  const std::string m = marker();
  Result r = run({"-np", "4", "/bin/sh", "-c",
                  "echo $CCL_RANK $CCL_WORLD_SIZE $CCL_LOCAL_RANK $CCL_LOCAL_SIZE $CCL_COMM_ID "
                  "$CCL_COMM_SECRET $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE "
                  "$MASTER_ADDR $MASTER_PORT ${CCL_BOOTSTRAP_LISTEN_FD:-none}",
                  m});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::vector<std::string> out = lines(r.out);
  ASSERT_EQ(out.size(), 4u) << r.out;
  std::set<int> ranks;
  std::set<std::string> ids, secrets;
  for (const auto& line : out) {
    std::istringstream in(line);
    int rank, size, local, local_size, trank, tsize, tlocal, tlocal_size;
    std::string id, secret, master, master_port, fd;
    in >> rank >> size >> local >> local_size >> id >> secret >> trank >> tsize >> tlocal >>
        tlocal_size >> master >> master_port >> fd;
    ASSERT_FALSE(in.fail()) << line;
    ranks.insert(rank);
    ids.insert(id);
    secrets.insert(secret);
    EXPECT_EQ(size, 4);
    EXPECT_EQ(local, rank);
    EXPECT_EQ(local_size, 4);
    EXPECT_EQ(trank, rank);
    EXPECT_EQ(tsize, 4);
    EXPECT_EQ(tlocal, rank);
    EXPECT_EQ(tlocal_size, 4);
    EXPECT_EQ(master, "127.0.0.1");
    EXPECT_EQ(id, "127.0.0.1:" + master_port);
    EXPECT_EQ(secret.size(), 32u);
    EXPECT_EQ(secret.find_first_not_of("0123456789abcdef"), std::string::npos) << secret;
    if (rank == 0) {
      EXPECT_NE(fd, "none");
    } else {
      EXPECT_EQ(fd, "none");
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(secrets.size(), 1u);
  // A new secret every run.
  Result again = run({"-np", "1", "/bin/sh", "-c", "echo $CCL_COMM_SECRET"});
  EXPECT_EQ(lines(again.out).size(), 1u);
  EXPECT_NE(lines(again.out).at(0), *secrets.begin());
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, ExportedVariables) {
  setenv("CCLRUN_TEST_FORWARDED", "from-parent", 1);
  Result r = run({"-n", "2", "-x", "CCLRUN_TEST_A=1=2", "-x", "CCLRUN_TEST_FORWARDED", "-x",
                  "CCLRUN_TEST_UNSET_VAR", "/bin/sh", "-c",
                  "echo $CCLRUN_TEST_A $CCLRUN_TEST_FORWARDED ${CCLRUN_TEST_UNSET_VAR-unset}"});
  unsetenv("CCLRUN_TEST_FORWARDED");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "1=2 from-parent unset\n1=2 from-parent unset\n");
}

TEST(Cclrun, FailureKillsTheOthersAfterGrace) {
  const std::string m = marker();
  // Rank 1 fails at once; the others sleep (as a child of the shell, so killing the shell
  // orphans the sleep: cclrun must find and kill it too).
  Result r = run({"-np", "3", "--grace", "1", "/bin/sh", "-c",
                  "if [ $CCL_RANK = 1 ]; then exit 3; fi; sleep " + m + "; echo woke", m});
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("cclrun: rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") exited with status 3\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SIGTERM"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_GE(r.seconds, 0.9);  // the grace period was given
  EXPECT_LT(r.seconds, 4.5);
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, OthersMayFinishWithinGrace) {
  // Rank 1 fails first with 5; rank 0 notices later and fails with 7: cclrun reports 5, and
  // nobody needed a signal.
  Result r = run({"-np", "2", "--grace", "3", "/bin/sh", "-c",
                  "if [ $CCL_RANK = 1 ]; then exit 5; fi; sleep 0.3; exit 7"});
  EXPECT_EQ(r.status, 5);
  EXPECT_NE(r.err.find("exited with status 5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with status 7"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("SIGTERM"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 2.5);
}

TEST(Cclrun, KilledBySignal) {
  const std::string m = marker();
  Result r = run({"-np", "2", "--grace", "1", "/bin/sh", "-c",
                  "if [ $CCL_RANK = 0 ]; then kill -9 $$; fi; exec sleep " + m});
  EXPECT_EQ(r.status, 128 + 9);
  EXPECT_NE(r.err.find("cclrun: rank 0 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") killed by signal 9\n"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 4.5);
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, AllSucceed) {
  Result r = run({"--np", "5", "/bin/sh", "-c", "exit 0"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_LT(r.seconds, 3);
}

TEST(Cclrun, TagOutput) {
  Result r = run({"-np", "2", "--tag-output", "/bin/sh", "-c",
                  "echo out$CCL_RANK; echo err$CCL_RANK >&2; echo two$CCL_RANK; "
                  "printf partial$CCL_RANK"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> out = lines(r.out), err = lines(r.err);
  std::sort(out.begin(), out.end());
  std::sort(err.begin(), err.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[0] out0", "[0] partial0", "[0] two0", "[1] out1",
                                           "[1] partial1", "[1] two1"}))
      << r.out;
  EXPECT_EQ(err, (std::vector<std::string>{"[0] err0", "[1] err1"})) << r.err;
  // Per rank, lines keep their order.
  EXPECT_LT(r.out.find("[1] out1"), r.out.find("[1] two1"));
  EXPECT_LT(r.out.find("[1] two1"), r.out.find("[1] partial1"));
  EXPECT_EQ(r.out.back(), '\n');
}

TEST(Cclrun, Timeout) {
  const std::string m = marker();
  Result r = run({"-np", "2", "--timeout", "1", "/bin/sh", "-c", "exec sleep " + m});
  EXPECT_EQ(r.status, 124);
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
  EXPECT_GE(r.seconds, 0.9);
  EXPECT_LT(r.seconds, 4);
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, TimeoutEscalatesToSigkill) {
  // The shell ignores SIGTERM (and so does its sleep, which inherits the ignored signal).
  const std::string m = marker();
  Result r =
      run({"-np", "2", "--timeout", "1", "/bin/sh", "-c", "trap '' TERM; sleep " + m + "; :", m});
  EXPECT_EQ(r.status, 124);
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
  EXPECT_GE(r.seconds, 2.9);  // 1 s, then SIGTERM, then SIGKILL 2 s later
  EXPECT_LT(r.seconds, 6);
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, RankZeroGetsTheListeningSocket) {
  Result r = run({"-np", "4", LISTEN_FD_PROBE_PATH});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(Cclrun, ForwardsSignals) {
  const std::string m = marker();
  Cclrun c({"-np", "3", "/bin/sh", "-c",
            "trap 'echo usr1-$CCL_RANK; exit 0' USR1; sleep " + m + " & echo ready; wait", m});
  ASSERT_TRUE(c.wait_for_lines("ready", 3, 10)) << c.out() << c.err();
  kill(c.pid(), SIGUSR1);
  EXPECT_EQ(c.finish(), 0) << c.err();
  std::vector<std::string> out = lines(c.out());
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out,
            (std::vector<std::string>{"ready", "ready", "ready", "usr1-0", "usr1-1", "usr1-2"}));
  // The sleeps the shells left behind were cleaned up.
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, SigtermStopsEverything) {
  const std::string m = marker();
  Cclrun c({"-np", "2", "--grace", "1", "/bin/sh", "-c", "echo ready; exec sleep " + m});
  ASSERT_TRUE(c.wait_for_lines("ready", 2, 10)) << c.out() << c.err();
  kill(c.pid(), SIGTERM);
  EXPECT_EQ(c.finish(), 128 + SIGTERM);
  EXPECT_LT(c.elapsed(), 5);
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, RanksDieWithCclrun) {
  const std::string m = marker();
  Cclrun c({"-np", "3", "/bin/sh", "-c", "echo ready; exec sleep " + m});
  ASSERT_TRUE(c.wait_for_lines("ready", 3, 10)) << c.out() << c.err();
  auto until = Clock::now() + std::chrono::seconds(5);
  while (processes_with(m).size() < 3 && Clock::now() < until) {  // the shells exec sleep
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(processes_with(m).size(), 3u);
  kill(c.pid(), SIGKILL);
  EXPECT_EQ(c.finish(), 1000 + SIGKILL);
  // PR_SET_PDEATHSIG: the kernel kills the ranks; init reaps them shortly after.
  until = Clock::now() + std::chrono::seconds(3);
  while (!processes_with(m).empty() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(processes_with(m).empty());
}

// Lines of `text` that contain `what`.
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (const auto& l : lines(text)) n += l.find(what) != std::string::npos ? 1 : 0;
  return n;
}

TEST(Cclrun, RestartFailedReplacesARank) {
  // Rank 1's first process dies of SIGKILL; its replacement runs with the same rank, the same
  // rendezvous variables and CCL_REPLACEMENT=1, CCL_REPLACEMENT_COUNT=1. The others outlive
  // --grace by far: had the grace period started, SIGTERM would have cut their sleep short.
  const std::string m = marker();
  setenv("CCL_REPLACEMENT", "stale", 1);  // cclrun's own environment must not leak into ranks
  Result r = run({"-np", "3", "--restart-failed", "--grace", "0.2", "--tag-output", "/bin/sh", "-c",
                  "echo env $CCL_RANK $RANK $CCL_WORLD_SIZE $CCL_COMM_ID $CCL_COMM_SECRET "
                  "${CCL_REPLACEMENT:-none} ${CCL_REPLACEMENT_COUNT:-none} "
                  "${CCL_BOOTSTRAP_LISTEN_FD:-nofd}; "
                  "if [ $CCL_RANK = 1 ] && [ -z \"$CCL_REPLACEMENT\" ]; then kill -9 $$; fi; "
                  "sleep 1; echo done $CCL_RANK",
                  m});
  unsetenv("CCL_REPLACEMENT");
  EXPECT_EQ(r.status, 0) << r.err;  // rank 1's status is its replacement's
  EXPECT_EQ(count_of(r.err, "rank 1 (pid "), 1) << r.err;
  EXPECT_NE(r.err.find(") killed by signal 9\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cclrun: rank 1 replaced by pid "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("SIGTERM"), std::string::npos) << r.err;
  std::vector<std::string> env;
  for (const auto& l : lines(r.out)) {
    if (l.find(" env ") != std::string::npos) env.push_back(l);
  }
  ASSERT_EQ(env.size(), 4u) << r.out;
  std::sort(env.begin(), env.end());
  // "[R] env CCL_RANK RANK SIZE ID SECRET REPLACEMENT COUNT FD": fields 0 to 9.
  auto field = [](const std::string& line, int i) {
    std::istringstream in(line);
    std::string f;
    for (int k = 0; k <= i; ++k) in >> f;
    return f;
  };
  EXPECT_EQ(field(env[1], 0), "[1]");
  EXPECT_EQ(field(env[2], 0), "[1]");
  const bool second_is_replacement = field(env[1], 7) == "none";
  const std::string& first = second_is_replacement ? env[1] : env[2];
  const std::string& replacement = second_is_replacement ? env[2] : env[1];
  EXPECT_EQ(field(first, 7), "none") << first;
  for (int f : {2, 3}) EXPECT_EQ(field(replacement, f), "1") << replacement;
  for (int f : {4, 5, 6}) EXPECT_EQ(field(replacement, f), field(env[0], f)) << replacement;
  EXPECT_EQ(field(replacement, 7), "1") << replacement;
  EXPECT_EQ(field(replacement, 8), "1") << replacement;
  EXPECT_EQ(field(replacement, 9), "nofd") << replacement;
  std::vector<std::string> done;
  for (const auto& l : lines(r.out)) {
    if (l.find(" done ") != std::string::npos) done.push_back(l);
  }
  std::sort(done.begin(), done.end());
  EXPECT_EQ(done, (std::vector<std::string>{"[0] done 0", "[1] done 1", "[2] done 2"})) << r.out;
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, RestartFailedReplacesRankZeroWithoutTheListeningSocket) {
  // Rank 0's replacement cannot have the rendezvous socket (the world's rendezvous is over).
  Result r = run({"-np", "2", "--restart-failed", "/bin/sh", "-c",
                  "if [ $CCL_RANK = 0 ] && [ -z \"$CCL_REPLACEMENT\" ]; then exit 9; fi; "
                  "echo $CCL_RANK ${CCL_REPLACEMENT_COUNT:-0} ${CCL_BOOTSTRAP_LISTEN_FD:-nofd}"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("cclrun: rank 0 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") exited with status 9\n"), std::string::npos) << r.err;
  std::vector<std::string> out = lines(r.out);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"0 1 nofd", "1 0 nofd"})) << r.out;
}

TEST(Cclrun, RestartBudgetIsPerJob) {
  // Every process fails: two replacements in all (whichever ranks fail first), then the third
  // failure ends the job as without the option: its status, the grace period, SIGTERM.
  const std::string m = marker();
  Result r = run({"-np", "2", "--restart-failed=2", "--grace", "0.5", "/bin/sh", "-c",
                  "if [ $CCL_RANK = 1 ]; then exit 3; fi; "
                  "if [ -n \"$CCL_REPLACEMENT\" ]; then exit 4; fi; sleep " +
                      m,
                  m});
  // Rank 1 fails (3), is replaced, fails (3), is replaced, fails (3): no replacement left.
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(count_of(r.err, "replaced by pid"), 2) << r.err;
  EXPECT_NE(r.err.find("CCL_REPLACEMENT_COUNT=2; 0 of 2 replacements left"), std::string::npos)
      << r.err;
  EXPECT_EQ(count_of(r.err, "no replacement left for rank 1 (--restart-failed=2 used up)"), 1)
      << r.err;
  EXPECT_NE(r.err.find("SIGTERM"), std::string::npos) << r.err;  // rank 0's sleep, after grace
  EXPECT_LT(r.seconds, 5);
  EXPECT_TRUE(processes_with(m).empty());
}

TEST(Cclrun, ReplacementStatusIsTheRanksStatus) {
  // Rank 1's replacement exits with 5 and no replacement is left: the job's status is 5, not
  // the first process's 137.
  Result r = run({"-np", "2", "--restart-failed", "--grace", "2", "/bin/sh", "-c",
                  "if [ $CCL_RANK = 1 ]; then "
                  "if [ -n \"$CCL_REPLACEMENT\" ]; then exit 5; fi; kill -9 $$; fi; sleep 0.3"});
  EXPECT_EQ(r.status, 5) << r.err;
  EXPECT_NE(r.err.find("killed by signal 9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with status 5"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("SIGTERM"), std::string::npos) << r.err;  // rank 0 ended in its grace
}

TEST(Cclrun, RestartFailedZeroIsOff) {
  Result r = run({"-np", "2", "--restart-failed=0", "--grace", "1", "/bin/sh", "-c",
                  "if [ $CCL_RANK = 1 ]; then exit 3; fi; echo ${CCL_REPLACEMENT:-first}"});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(r.err.find("replace"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "first\n");
}

TEST(Cclrun, NothingIsReplacedWhileStopping) {
  // The ranks die of cclrun's own SIGTERM at --timeout: those are not failures to replace.
  const std::string m = marker();
  Result r =
      run({"-np", "2", "--restart-failed=5", "--timeout", "1", "/bin/sh", "-c", "exec sleep " + m});
  EXPECT_EQ(r.status, 124);
  EXPECT_EQ(r.err.find("replace"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 4);
  EXPECT_TRUE(processes_with(m).empty());
  // Nor after a failure that had no replacement: rank 1 fails with the budget spent, rank 0
  // then fails too during the grace period.
  r = run({"-np", "3", "--restart-failed=1", "--grace", "3", "/bin/sh", "-c",
           "case $CCL_RANK$CCL_REPLACEMENT in 2) exit 6;; 1) sleep 0.2; exit 7;; esac; "
           "sleep 0.6; exit 8"});
  EXPECT_EQ(r.status, 7) << r.err;  // rank 2 was replaced; rank 1's 7 came first after that
  EXPECT_EQ(count_of(r.err, "replaced by pid"), 1) << r.err;
  EXPECT_EQ(count_of(r.err, "no replacement left for rank 1"), 1) << r.err;
  EXPECT_EQ(count_of(r.err, "exited with status 8"), 2) << r.err;  // rank 0, rank 2's replacement
}

TEST(Cclrun, BadUsage) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"/bin/true"},
      {"-np", "0", "/bin/true"},
      {"-np", "4097", "/bin/true"},
      {"-np", "abc", "/bin/true"},
      {"-np", "-1", "/bin/true"},
      {"-np", "2"},
      {"-np"},
      {"-np", "2", "--grace", "x", "/bin/true"},
      {"-np", "2", "--timeout", "0", "/bin/true"},
      {"-np", "2", "--bogus", "/bin/true"},
      {"-np", "2", "-x", "=v", "/bin/true"},
      {"-np", "2", "--restart-failed=", "/bin/true"},
      {"-np", "2", "--restart-failed=x", "/bin/true"},
      {"-np", "2", "--restart-failed=-1", "/bin/true"},
      {"-np", "2", "--restart-failed=1001", "/bin/true"},
  };
  for (const auto& args : cases) {
    Result r = run(args);
    EXPECT_EQ(r.status, 2) << ::testing::PrintToString(args);
    EXPECT_NE(r.err.find("usage: cclrun -np N"), std::string::npos) << r.err;
  }
  Result help = run({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("usage: cclrun -np N"), std::string::npos);
}

TEST(Cclrun, ProgramNotFound) {
  Result r = run({"-np", "2", "cclrun-test-no-such-program"});
  EXPECT_EQ(r.status, 127);
  EXPECT_NE(r.err.find("cclrun-test-no-such-program: command not found"), std::string::npos)
      << r.err;
  r = run({"-np", "2", "/nonexistent/prog"});
  EXPECT_EQ(r.status, 127);
  EXPECT_NE(r.err.find("/nonexistent/prog: No such file or directory"), std::string::npos) << r.err;
  r = run({"-np", "2", "/etc/passwd"});  // exists, not executable
  EXPECT_EQ(r.status, 126);
  EXPECT_NE(r.err.find("/etc/passwd: not an executable file"), std::string::npos) << r.err;
}

TEST(Cclrun, ManyRanks) {
  Result r = run({"-np", "64", "--tag-output", "/bin/sh", "-c", "echo $CCL_RANK"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> out = lines(r.out);
  ASSERT_EQ(out.size(), 64u);
  std::set<std::string> want, got(out.begin(), out.end());
  for (int i = 0; i < 64; ++i) want.insert("[" + std::to_string(i) + "] " + std::to_string(i));
  EXPECT_EQ(got, want);
}

}  // namespace
