// Starting one process of a rank: its environment, descriptors, binding and (under --tag-output)
// its output pipes. The first start of every rank and each replacement (--restart-failed) go
// through here, so a replacement runs exactly as its rank did, plus CCL_REPLACEMENT and
// CCL_REPLACEMENT_COUNT.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "bind.h"
#include "options.h"
#include "spawn.h"

namespace ccl::cclrun {

// A process just started: its pid (-1 if fork failed, errno then set) and the read ends of its
// stdout and stderr pipes (-1 without --tag-output), non-blocking.
struct StartedRank {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
};

class RankLauncher {
 public:
  // base_env: every rank's environment without the per-rank variables. listen_fd: the
  // rendezvous socket, handed to rank 0's first process only. dev_null: the other ranks' stdin.
  // The launcher owns and closes both descriptors.
  RankLauncher(const Options& options, EnvList base_env, std::vector<BindUnit> bindings,
               int listen_fd, int dev_null, const sigset_t& signal_mask, const rlimit& nofile);
  ~RankLauncher();
  RankLauncher(const RankLauncher&) = delete;
  RankLauncher& operator=(const RankLauncher&) = delete;

  // Starts rank's process; replacement 0 is its first, K > 0 its K-th replacement. Prints why
  // on failure (pid -1).
  StartedRank start(int rank, int replacement);

 private:
  const Options& options_;
  EnvList base_env_;
  std::vector<BindUnit> bindings_;
  int listen_fd_;
  int dev_null_;
  sigset_t signal_mask_;
  rlimit nofile_;
};

}  // namespace ccl::cclrun
