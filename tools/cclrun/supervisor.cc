#include "supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace ccl::cclrun {

namespace {

constexpr std::chrono::seconds kKillDelay{2};  // SIGTERM → SIGKILL

Supervisor::Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Supervisor::Clock::duration>(std::chrono::duration<double>(s));
}

// Our live (non-zombie) children, found through /proc: with PR_SET_CHILD_SUBREAPER they include
// processes the ranks started and orphaned, which cclrun otherwise knows nothing about.
std::vector<pid_t> list_children() {
  std::vector<pid_t> out;
  pid_t self = getpid();
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE* f = fopen(path, "re");
    if (f == nullptr) continue;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    // "pid (comm) state ppid ...": comm may contain spaces and ')', so parse after the last ')'.
    char* close = strrchr(buf, ')');
    char state = 0;
    long ppid = 0;
    if (close != nullptr && sscanf(close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self &&
        state != 'Z') {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(dir);
  return out;
}

// Drains the signalfd; returns true if it held anything.
bool drain_signal_fd(int fd) {
  bool any = false;
  signalfd_siginfo info[16];
  while (read(fd, info, sizeof(info)) > 0) any = true;
  return any;
}

int poll_ms(Supervisor::Clock::time_point until) {
  auto left = until - Supervisor::Clock::now();
  if (left <= Supervisor::Clock::duration::zero()) return 0;
  // Round up: a 0 ms timeout before the deadline would spin.
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

}  // namespace

Supervisor::Supervisor(int signal_fd, double grace_seconds, double timeout_seconds,
                       int restart_budget, StartRank start_rank)
    : signal_fd_(signal_fd),
      grace_seconds_(grace_seconds),
      timeout_seconds_(timeout_seconds),
      restarts_left_(start_rank ? restart_budget : 0),
      restart_budget_(restart_budget),
      start_rank_(std::move(start_rank)) {
  if (timeout_seconds > 0) timeout_at_ = Clock::now() + seconds(timeout_seconds);
}

Supervisor::~Supervisor() {
  for (auto& o : outputs_) {
    if (o->fd >= 0) ::close(o->fd);
  }
}

void Supervisor::add_rank(int rank, const StartedRank& started) {
  ranks_.push_back(Rank{rank, started.pid});
  track(ranks_.size() - 1, started);
}

void Supervisor::track(size_t index, const StartedRank& started) {
  rank_of_pid_[started.pid] = index;
  const int rank = ranks_[index].rank;
  if (started.out_fd >= 0) add_output(rank, started.out_fd, STDOUT_FILENO);
  if (started.err_fd >= 0) add_output(rank, started.err_fd, STDERR_FILENO);
}

void Supervisor::add_output(int rank, int pipe_fd, int to_fd) {
  outputs_.push_back(std::make_unique<Output>(Output{pipe_fd, LineTagger(rank, to_fd)}));
}

void Supervisor::spawn_failed() {
  if (first_failure_ == 0) first_failure_ = 1;
  term_at_ = Clock::now();  // the ranks already started would wait for the missing ones
}

int Supervisor::live_ranks() const {
  int n = 0;
  for (const auto& r : ranks_) n += r.alive ? 1 : 0;
  return n;
}

void Supervisor::fail(int code) {
  if (first_failure_ == 0) first_failure_ = code;
  if (!term_at_ && !kill_at_ && live_ranks() > 0) term_at_ = Clock::now() + seconds(grace_seconds_);
}

void Supervisor::on_rank_exit(Rank& r, int status) {
  r.alive = false;
  int code = 1;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
    if (code != 0 && !we_signalled_) {
      fprintf(stderr, "cclrun: rank %d (pid %d) exited with status %d\n", r.rank, r.pid, code);
    }
  } else if (WIFSIGNALED(status)) {
    code = 128 + WTERMSIG(status);
    if (!we_signalled_) {
      fprintf(stderr, "cclrun: rank %d (pid %d) killed by signal %d\n", r.rank, r.pid,
              WTERMSIG(status));
    }
  }
  if (code == 0) return;
  if (!stopping() && restarts_left_ > 0) {
    if (replace(r)) return;
  } else if (!stopping() && restart_budget_ > 0) {
    fprintf(stderr, "cclrun: no replacement left for rank %d (--restart-failed=%d used up)\n",
            r.rank, restart_budget_);
  }
  fail(code);
}

bool Supervisor::stopping() const {
  // Once the job is stopping, a failure is part of the stop: nothing is replaced.
  return first_failure_ != 0 || received_signal_ != 0 || timed_out_ || we_signalled_ || term_at_ ||
         kill_at_;
}

bool Supervisor::replace(Rank& r) {
  --restarts_left_;
  const int replacement = r.replacements + 1;
  const StartedRank started = start_rank_(r.rank, replacement);
  if (started.pid < 0) {
    fprintf(stderr, "cclrun: rank %d has failed for good: its replacement did not start\n", r.rank);
    return false;
  }
  rank_of_pid_.erase(r.pid);
  r.replacements = replacement;
  r.pid = started.pid;
  r.alive = true;
  fprintf(stderr,
          "cclrun: rank %d replaced by pid %d (CCL_REPLACEMENT_COUNT=%d; %d of %d replacements "
          "left)\n",
          r.rank, started.pid, replacement, restarts_left_, restart_budget_);
  track(static_cast<size_t>(&r - ranks_.data()), started);
  return true;
}

void Supervisor::reap() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    auto it = rank_of_pid_.find(pid);
    // Not a rank: an orphan the ranks left behind, adopted by us as subreaper.
    if (it != rank_of_pid_.end()) on_rank_exit(ranks_[it->second], status);
  }
}

void Supervisor::signal_all(int sig) {
  for (const auto& r : ranks_) {
    if (r.alive) kill(r.pid, sig);
  }
  for (pid_t pid : list_children()) {
    if (!rank_of_pid_.contains(pid)) kill(pid, sig);
  }
}

void Supervisor::handle_signals() {
  signalfd_siginfo info[16];
  bool need_reap = false;
  ssize_t n;
  while ((n = read(signal_fd_, info, sizeof(info))) > 0) {
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(info[0]); ++i) {
      int sig = static_cast<int>(info[i].ssi_signo);
      if (sig == SIGCHLD) {
        need_reap = true;
        continue;
      }
      if (sig == SIGUSR1 || sig == SIGUSR2) {
        for (const auto& r : ranks_) {
          if (r.alive) kill(r.pid, sig);
        }
        continue;
      }
      // SIGINT, SIGTERM, SIGHUP, SIGQUIT: cclrun is being asked to stop.
      if (received_signal_ == 0) received_signal_ = sig;
      if (++terminating_signals_ > 1) {
        fprintf(stderr, "cclrun: %s received again: killing all ranks\n", strsignal(sig));
        we_signalled_ = true;
        killed_ = true;
        signal_all(SIGKILL);
        continue;
      }
      // Ctrl-C and Ctrl-\ on a terminal already reach every rank (they share cclrun's process
      // group); a second copy would interrupt the ranks' own handlers.
      bool from_terminal = info[i].ssi_code == SI_KERNEL && (sig == SIGINT || sig == SIGQUIT);
      if (!from_terminal) {
        for (const auto& r : ranks_) {
          if (r.alive) kill(r.pid, sig);
        }
      }
      if (!term_at_ && !kill_at_) term_at_ = Clock::now() + seconds(grace_seconds_);
    }
  }
  if (need_reap) reap();
}

void Supervisor::check_timers() {
  auto now = Clock::now();
  if (timeout_at_ && now >= *timeout_at_ && !timed_out_) {
    timed_out_ = true;
    fprintf(stderr, "cclrun: timeout after %g s: terminating %d ranks\n", timeout_seconds_,
            live_ranks());
    we_signalled_ = true;
    signal_all(SIGTERM);
    term_at_.reset();
    kill_at_ = now + kKillDelay;
  }
  if (term_at_ && now >= *term_at_) {
    term_at_.reset();
    if (live_ranks() > 0) {
      fprintf(stderr, "cclrun: sending SIGTERM to the %d remaining ranks\n", live_ranks());
      we_signalled_ = true;
      signal_all(SIGTERM);
      kill_at_ = now + kKillDelay;
    }
  }
  if (kill_at_ && now >= *kill_at_) {
    kill_at_.reset();
    if (live_ranks() > 0) {
      fprintf(stderr, "cclrun: sending SIGKILL to the %d ranks that ignored SIGTERM\n",
              live_ranks());
      killed_ = true;
      signal_all(SIGKILL);
    }
  }
}

void Supervisor::read_output(size_t index) {
  Output& o = *outputs_[index];
  char buf[65536];
  ssize_t n = read(o.fd, buf, sizeof(buf));
  if (n > 0) {
    o.tagger.feed(buf, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    close_output(index);
  }
}

void Supervisor::close_output(size_t index) {
  Output& o = *outputs_[index];
  o.tagger.finish();
  ::close(o.fd);
  o.fd = -1;
}

void Supervisor::drain_outputs() {
  // Every writer is gone by now, so this reads what is buffered and then EOF; the descriptors
  // are non-blocking in case something outside our process tree still holds a write end.
  for (size_t i = 0; i < outputs_.size(); ++i) {
    char buf[65536];
    while (outputs_[i]->fd >= 0) {
      ssize_t n = read(outputs_[i]->fd, buf, sizeof(buf));
      if (n > 0) {
        outputs_[i]->tagger.feed(buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        close_output(i);
      }
    }
  }
}

void Supervisor::kill_leftovers() {
  // Each round signals what is left and waits for it; killing one process can orphan its own
  // children onto us, hence a few rounds. SIGTERM first, SIGKILL from the second round, or at
  // once when the ranks themselves needed SIGKILL (their children inherited what made them
  // ignore SIGTERM, e.g. a shell's trap "" TERM).
  for (int round = 0; round < 4; ++round) {
    std::vector<pid_t> left = list_children();
    if (left.empty()) return;
    int sig = round == 0 && !killed_ ? SIGTERM : SIGKILL;
    if (round == 0) {
      fprintf(stderr, "cclrun: terminating %zu processes the ranks left running\n", left.size());
    }
    for (pid_t pid : left) kill(pid, sig);
    auto until = Clock::now() + kKillDelay;
    while (true) {
      reap();
      if (list_children().empty()) break;
      int ms = poll_ms(until);
      if (ms == 0) break;
      pollfd p{signal_fd_, POLLIN, 0};
      if (poll(&p, 1, ms) > 0) drain_signal_fd(signal_fd_);
    }
  }
  reap();
}

int Supervisor::run() {
  std::vector<pollfd> fds;
  std::vector<size_t> fd_output;  // fds[i + 1] belongs to outputs_[fd_output[i]]
  while (live_ranks() > 0) {
    check_timers();
    std::optional<Clock::time_point> next;
    auto consider = [&](const std::optional<Clock::time_point>& t) {
      if (t && (!next || *t < *next)) next = *t;
    };
    if (!timed_out_) consider(timeout_at_);
    consider(term_at_);
    consider(kill_at_);
    fds.assign(1, pollfd{signal_fd_, POLLIN, 0});
    fd_output.clear();
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (outputs_[i]->fd < 0) continue;
      fds.push_back(pollfd{outputs_[i]->fd, POLLIN, 0});
      fd_output.push_back(i);
    }
    int ms = next ? poll_ms(*next) : -1;
    if (next && ms == 0) continue;  // a timer is due: check_timers at the loop head
    int ready = poll(fds.data(), fds.size(), ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      perror("cclrun: poll");
      break;
    }
    if (fds[0].revents != 0) handle_signals();
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_output(fd_output[i - 1]);
    }
  }
  kill_leftovers();
  drain_outputs();
  if (timed_out_) return 124;
  if (first_failure_ != 0) return first_failure_;
  if (received_signal_ != 0) return 128 + received_signal_;
  return 0;
}

}  // namespace ccl::cclrun
