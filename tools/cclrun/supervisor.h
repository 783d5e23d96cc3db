// The supervisor: one loop that reaps ranks, forwards signals, tags output and enforces the
// grace period and the timeout, sleeping in poll() on a signalfd and the output pipes.
//
// Failure policy: the first rank to fail (non-zero exit or a signal) sets cclrun's exit status
// (128+S for signal S); the others get `grace` seconds to notice and exit on their own, then
// SIGTERM, then SIGKILL 2 s later. --timeout does the same at once and exits with 124. cclrun is
// a child subreaper, so processes the ranks started and left behind become its children and are
// killed too before it exits: nothing survives a cclrun run.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "line_tagger.h"

namespace ccl::cclrun {

class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;

  // signal_fd: a signalfd for SIGCHLD and the forwarded signals (all blocked by the caller).
  Supervisor(int signal_fd, double grace_seconds, double timeout_seconds);
  ~Supervisor();

  void add_rank(int rank, pid_t pid);
  // A pipe carrying rank's stdout (to_fd 1) or stderr (to_fd 2), for --tag-output.
  void add_output(int rank, int pipe_fd, int to_fd);
  // Starting the ranks failed midway: treat it as a failure with exit status 1.
  void spawn_failed();

  // Runs until every rank has exited and leftovers are gone; returns cclrun's exit status.
  int run();

 private:
  struct Rank {
    int rank;
    pid_t pid;
    bool alive = true;
  };
  struct Output {
    int fd;
    LineTagger tagger;
  };

  void handle_signals();
  void reap();
  void on_rank_exit(Rank& r, int status);
  void read_output(size_t index);
  void close_output(size_t index);
  void drain_outputs();
  void check_timers();
  void signal_all(int sig);  // live ranks and adopted leftovers
  void fail(int code);
  void kill_leftovers();
  int live_ranks() const;

  int signal_fd_;
  double grace_seconds_;
  std::vector<Rank> ranks_;
  std::unordered_map<pid_t, size_t> rank_of_pid_;
  std::vector<std::unique_ptr<Output>> outputs_;

  int first_failure_ = 0;    // exit status of the first failed rank (0: none yet)
  int received_signal_ = 0;  // the first terminating signal cclrun received
  int terminating_signals_ = 0;
  bool timed_out_ = false;
  bool we_signalled_ = false;  // ranks dying from now on may be dying of our own signals
  bool killed_ = false;        // SIGKILL was needed
  std::optional<Clock::time_point> term_at_, kill_at_, timeout_at_;
  double timeout_seconds_;
};

}  // namespace ccl::cclrun
