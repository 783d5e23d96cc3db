#include "spawn.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace ccl::cclrun {

EnvList current_environment() {
  EnvList env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = strchr(*e, '=');
    if (eq == nullptr) continue;
    env.emplace_back(std::string(*e, eq - *e), std::string(eq + 1));
  }
  return env;
}

void env_set(EnvList* env, const std::string& name, const std::string& value) {
  for (auto& [n, v] : *env) {
    if (n == name) {
      v = value;
      return;
    }
  }
  env->emplace_back(name, value);
}

void env_unset(EnvList* env, const std::string& name) {
  std::erase_if(*env, [&](const auto& entry) { return entry.first == name; });
}

pid_t spawn_child(const ChildSetup& setup) {
  // Everything the child needs is built before fork: after it, only plain system calls.
  std::vector<std::string> env_strings;
  env_strings.reserve(setup.env.size());
  for (const auto& [name, value] : setup.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = setup.command;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;

  // Child. A rank must never outlive cclrun: if cclrun is killed (even by SIGKILL) the kernel
  // kills the rank. getppid() closes the race where cclrun died before prctl ran.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
  if (apply_affinity(setup.affinity) != 0) {
    int err = errno;
    dprintf(STDERR_FILENO, "cclrun: cannot bind %s: sched_setaffinity: %s\n", argv[0],
            strerror(err));
    _exit(126);
  }
  if (setup.stdin_fd >= 0) dup2(setup.stdin_fd, STDIN_FILENO);
  if (setup.stdout_fd >= 0) dup2(setup.stdout_fd, STDOUT_FILENO);
  if (setup.stderr_fd >= 0) dup2(setup.stderr_fd, STDERR_FILENO);
  if (setup.inherit_fd >= 0) {
    int flags = fcntl(setup.inherit_fd, F_GETFD);
    if (flags >= 0) fcntl(setup.inherit_fd, F_SETFD, flags & ~FD_CLOEXEC);
  }
  // cclrun ignores SIGPIPE (a closed terminal must not kill the supervisor); an ignored signal
  // stays ignored across exec, so give the rank the default back.
  signal(SIGPIPE, SIG_DFL);
  setrlimit(RLIMIT_NOFILE, &setup.nofile_limit);
  sigprocmask(SIG_SETMASK, &setup.signal_mask, nullptr);
  execvpe(argv[0], argv.data(), envp.data());
  int err = errno;
  dprintf(STDERR_FILENO, "cclrun: cannot run %s: %s\n", argv[0], strerror(err));
  _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

int check_program(const std::string& program, std::string* why) {
  auto executable = [](const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (executable(program)) return 0;
    struct stat st {};
    if (stat(program.c_str(), &st) != 0) {
      *why = program + ": " + strerror(errno);
      return 127;
    }
    *why = program + ": not an executable file";
    return 126;
  }
  const char* path_env = getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/bin:/usr/bin";
  size_t start = 0;
  while (true) {
    size_t end = path.find(':', start);
    std::string dir =
        path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (dir.empty()) dir = ".";
    if (executable(dir + "/" + program)) return 0;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  *why = program + ": command not found in PATH";
  return 127;
}

}  // namespace ccl::cclrun
