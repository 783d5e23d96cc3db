#include "rank_launcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ccl::cclrun {

namespace {

// mpirun's --report-bindings, in words: which core or NUMA node, and its CPUs.
void report_binding(BindPolicy policy, int rank, const std::vector<BindUnit>& bindings) {
  if (bindings.empty()) {
    fprintf(stderr, "cclrun: rank %d not bound\n", rank);
    return;
  }
  const BindUnit& unit = bindings[rank];
  fprintf(stderr, "cclrun: rank %d bound to %s %d: cpus %s\n", rank,
          policy == BindPolicy::kNuma ? "NUMA node" : "core", unit.index,
          format_cpu_list(unit.cpus).c_str());
}

void close_pair(int fds[2]) {
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
}

}  // namespace

RankLauncher::RankLauncher(const Options& options, EnvList base_env, std::vector<BindUnit> bindings,
                           int listen_fd, int dev_null, const sigset_t& signal_mask,
                           const rlimit& nofile)
    : options_(options),
      base_env_(std::move(base_env)),
      bindings_(std::move(bindings)),
      listen_fd_(listen_fd),
      dev_null_(dev_null),
      signal_mask_(signal_mask),
      nofile_(nofile) {
  // Whatever the environment cclrun was started with, these are for us to set per process.
  for (const char* name : {"CCL_BOOTSTRAP_LISTEN_FD", "CCL_REPLACEMENT", "CCL_REPLACEMENT_COUNT"}) {
    env_unset(&base_env_, name);
  }
}

RankLauncher::~RankLauncher() {
  if (listen_fd_ >= 0) close(listen_fd_);
  if (dev_null_ >= 0) close(dev_null_);
}

StartedRank RankLauncher::start(int rank, int replacement) {
  ChildSetup setup;
  setup.command = options_.command;
  setup.env = base_env_;
  const std::string r = std::to_string(rank);
  for (const char* name : {"CCL_RANK", "CCL_LOCAL_RANK", "RANK", "LOCAL_RANK"}) {
    env_set(&setup.env, name, r);
  }
  if (replacement > 0) {
    // The program tells a replacement from a first start by these; the rest is its rank's.
    env_set(&setup.env, "CCL_REPLACEMENT", "1");
    env_set(&setup.env, "CCL_REPLACEMENT_COUNT", std::to_string(replacement));
  }
  // Only rank 0's first process gets the rendezvous socket: by the time a replacement starts,
  // the world's rendezvous is over (the replacement joins through cclCommGrow instead).
  const bool with_listen_fd = rank == 0 && listen_fd_ >= 0;
  if (with_listen_fd) {
    setup.inherit_fd = listen_fd_;
    env_set(&setup.env, "CCL_BOOTSTRAP_LISTEN_FD", std::to_string(listen_fd_));
  }
  if (rank != 0) setup.stdin_fd = dev_null_;  // one reader of the terminal, like mpirun
  if (!bindings_.empty()) setup.affinity = make_affinity_mask(bindings_[rank].cpus);
  if (options_.report_bindings) report_binding(options_.bind, rank, bindings_);
  setup.signal_mask = signal_mask_;
  setup.nofile_limit = nofile_;

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (options_.tag_output) {
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
      const int err = errno;
      fprintf(stderr, "cclrun: cannot start rank %d: pipe: %s\n", rank, strerror(err));
      close_pair(out_pipe);
      close_pair(err_pipe);
      errno = err;
      return {};
    }
    setup.stdout_fd = out_pipe[1];
    setup.stderr_fd = err_pipe[1];
  }
  StartedRank started;
  started.pid = spawn_child(setup);
  const int fork_errno = errno;
  if (with_listen_fd) {  // rank 0 owns it now
    close(listen_fd_);
    listen_fd_ = -1;
  }
  if (options_.tag_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (started.pid < 0) {
      close(out_pipe[0]);
      close(err_pipe[0]);
    } else {
      fcntl(out_pipe[0], F_SETFL, fcntl(out_pipe[0], F_GETFL) | O_NONBLOCK);
      fcntl(err_pipe[0], F_SETFL, fcntl(err_pipe[0], F_GETFL) | O_NONBLOCK);
      started.out_fd = out_pipe[0];
      started.err_fd = err_pipe[0];
    }
  }
  if (started.pid < 0) {
    fprintf(stderr, "cclrun: cannot start rank %d: fork: %s\n", rank, strerror(fork_errno));
    errno = fork_errno;
  }
  return started;
}

}  // namespace ccl::cclrun
