// cclrun: starts N local ranks of a program, ready for cclCommInitFromEnv, and supervises them.
// See options.cc for the command line and supervisor.h for the failure policy.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bind.h"
#include "options.h"
#include "rank_launcher.h"
#include "spawn.h"
#include "supervisor.h"

namespace ccl::cclrun {
namespace {

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "cclrun: %s: %s\n", what, strerror(errno));
  exit(1);
}

// With 0, 1 or 2 closed, our own sockets and pipes would land there and be clobbered by dup2.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      if (open("/dev/null", O_RDWR) < 0) die("open /dev/null");
    }
  }
}

// The rendezvous socket, bound here so that the port is known before any rank starts and no
// other process can take it in between: rank 0 inherits it (CCL_BOOTSTRAP_LISTEN_FD).
int listen_loopback(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) die("bind 127.0.0.1:0");
  if (listen(fd, 128) != 0) die("listen");
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) die("getsockname");
  *port = ntohs(addr.sin_port);
  return fd;
}

std::string random_secret_hex() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("getrandom");
    }
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : bytes) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

int run_main(int argc, char** argv) {
  ensure_standard_fds();
  Options options;
  std::string error;
  if (!parse_options(argc, argv, &options, &error)) {
    fprintf(stderr, "cclrun: %s\n%s", error.c_str(), usage_text());
    return 2;
  }
  if (options.help) {
    fputs(usage_text(), stdout);
    return 0;
  }
  if (int code = check_program(options.command[0], &error); code != 0) {
    fprintf(stderr, "cclrun: %s\n", error.c_str());
    return code;
  }

  // Binding is planned here, with hwloc, before any fork; a child only applies its mask.
  std::vector<BindUnit> bindings;
  if (!plan_bindings(options.bind, options.nranks, &bindings, &error)) {
    fprintf(stderr, "cclrun: %s\n", error.c_str());
    return 2;
  }

  // The supervisor takes every signal it cares about through a signalfd.
  signal(SIGPIPE, SIG_IGN);
  sigset_t handled, original_mask;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) {
    sigaddset(&handled, sig);
  }
  if (sigprocmask(SIG_BLOCK, &handled, &original_mask) != 0) die("sigprocmask");
  int signal_fd = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) die("signalfd");
  // Orphans of the ranks become our children, so that we can kill them too.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die("prctl(PR_SET_CHILD_SUBREAPER)");

  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  if (options.tag_output) {
    // Two pipes per rank; a replacement's pipes may open before its predecessor's reach EOF.
    const int replacing = std::min(options.restart_failed, options.nranks);
    rlim_t need = 2 * static_cast<rlim_t>(options.nranks + replacing) + 64;
    if (nofile.rlim_cur < need) {
      if (nofile.rlim_max < need) {
        fprintf(stderr,
                "cclrun: --tag-output with %d ranks needs %lu open files; the limit is %lu\n",
                options.nranks, static_cast<unsigned long>(need),
                static_cast<unsigned long>(nofile.rlim_max));
        return 1;
      }
      rlimit raised = nofile;
      raised.rlim_cur = need;
      if (setrlimit(RLIMIT_NOFILE, &raised) != 0) die("setrlimit(RLIMIT_NOFILE)");
    }
  }

  int port = 0;
  int listen_fd = listen_loopback(&port);
  const std::string address = "127.0.0.1";
  const std::string comm_id = address + ":" + std::to_string(port);
  const std::string secret = random_secret_hex();
  int dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (dev_null < 0) die("open /dev/null");

  EnvList base = current_environment();
  for (const auto& [name, value] : options.exports) env_set(&base, name, value);
  const std::string n = std::to_string(options.nranks);
  for (const auto& [name, value] : EnvList{{"CCL_WORLD_SIZE", n},
                                           {"CCL_LOCAL_SIZE", n},
                                           {"CCL_COMM_ID", comm_id},
                                           {"CCL_COMM_SECRET", secret},
                                           {"WORLD_SIZE", n},
                                           {"LOCAL_WORLD_SIZE", n},
                                           {"MASTER_ADDR", address},
                                           {"MASTER_PORT", std::to_string(port)}}) {
    env_set(&base, name, value);
  }

  RankLauncher launcher(options, std::move(base), std::move(bindings), listen_fd, dev_null,
                        original_mask, nofile);
  Supervisor supervisor(
      signal_fd, options.grace_seconds, options.timeout_seconds, options.restart_failed,
      [&launcher](int rank, int replacement) { return launcher.start(rank, replacement); });
  for (int rank = 0; rank < options.nranks; ++rank) {
    const StartedRank started = launcher.start(rank, 0);
    if (started.pid < 0) {
      supervisor.spawn_failed();
      break;
    }
    supervisor.add_rank(rank, started);
  }
  return supervisor.run();
}

}  // namespace
}  // namespace ccl::cclrun

int main(int argc, char** argv) { return ccl::cclrun::run_main(argc, argv); }
