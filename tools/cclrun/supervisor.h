// The supervisor: one loop that reaps ranks, forwards signals, tags output, replaces failed
// ranks and enforces the grace period and the timeout, sleeping in poll() on a signalfd and the
// output pipes.
//
// Failure policy: the first rank to fail (non-zero exit or a signal) sets cclrun's exit status
// (128+S for signal S); the others get `grace` seconds to notice and exit on their own, then
// SIGTERM, then SIGKILL 2 s later. --timeout does the same at once and exits with 124. cclrun is
// a child subreaper, so processes the ranks started and left behind become its children and are
// killed too before it exits: nothing survives a cclrun run.
//
// Replacements (--restart-failed=N): while the job is not stopping (no failure without a
// replacement yet, no --timeout, no terminating signal to cclrun), a failed rank is started again
// at once and nothing else happens: no grace period, no exit status. The replacement is that
// rank's process from then on, so a rank's status is its last process's. After N replacements in
// the job, failures are handled as above. A program must expect this: the replacement cannot join
// the world's first rendezvous again; the survivors shrink and then grow back to it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "line_tagger.h"
#include "rank_launcher.h"

namespace ccl::cclrun {

class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts the `replacement`-th replacement (1, 2, ...) of a failed rank.
  using StartRank = std::function<StartedRank(int rank, int replacement)>;

  // signal_fd: a signalfd for SIGCHLD and the forwarded signals (all blocked by the caller).
  // restart_budget: how many failed ranks may be replaced through start_rank in this job.
  Supervisor(int signal_fd, double grace_seconds, double timeout_seconds, int restart_budget = 0,
             StartRank start_rank = {});
  ~Supervisor();

  // A rank's first process, with its output pipes under --tag-output.
  void add_rank(int rank, const StartedRank& started);
  // Starting the ranks failed midway: treat it as a failure with exit status 1.
  void spawn_failed();

  // Runs until every rank has exited and leftovers are gone; returns cclrun's exit status.
  int run();

 private:
  struct Rank {
    int rank;
    pid_t pid;
    bool alive = true;
    int replacements = 0;  // processes started after the first
  };
  struct Output {
    int fd;
    LineTagger tagger;
  };

  void handle_signals();
  void reap();
  void on_rank_exit(Rank& r, int status);
  bool stopping() const;
  // Starts r's next process; false (the failure stands) if it could not be started.
  bool replace(Rank& r);
  // A pipe carrying rank's stdout (to_fd 1) or stderr (to_fd 2), for --tag-output.
  void add_output(int rank, int pipe_fd, int to_fd);
  // Takes `started` as the process of ranks_[index] (its pid, its output pipes).
  void track(size_t index, const StartedRank& started);
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
  int restarts_left_;
  const int restart_budget_;
  StartRank start_rank_;
};

}  // namespace ccl::cclrun
