// Starting one rank: fork, tie the child's life to cclrun's, wire its descriptors and exec.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "bind.h"

namespace ccl::cclrun {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// cclrun's environment as name/value pairs.
EnvList current_environment();
// Replaces or appends name=value.
void env_set(EnvList* env, const std::string& name, const std::string& value);
void env_unset(EnvList* env, const std::string& name);

struct ChildSetup {
  std::vector<std::string> command;  // PROGRAM ARGS...
  EnvList env;
  int stdin_fd = -1;      // dup2'ed onto 0 when >= 0
  int stdout_fd = -1;     // dup2'ed onto 1 when >= 0
  int stderr_fd = -1;     // dup2'ed onto 2 when >= 0
  int inherit_fd = -1;    // left open across exec (the listening socket for rank 0)
  sigset_t signal_mask;   // restored in the child (cclrun blocks the signals it handles)
  rlimit nofile_limit{};  // restored in the child (cclrun may raise its own)
  AffinityMask affinity;  // --bind: applied in the child before exec; empty: inherit cclrun's
};

// Returns the child's pid, or -1 with errno set if fork failed. If exec fails the child prints
// why and exits with 127 (not found) or 126 (not executable), like a shell.
pid_t spawn_child(const ChildSetup& setup);

// Resolves PROGRAM the way execvp will, so that "not found" is reported before any rank starts.
// Returns 0 if found, else 127 (not found) or 126 (found but not executable) with *why set.
int check_program(const std::string& program, std::string* why);

}  // namespace ccl::cclrun
