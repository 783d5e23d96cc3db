#include "transport/shm/peer_liveness.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace ccl::transport::shm {

namespace {

// The process state letter of /proc/<pid>/stat ('?' if unreadable). The command name in
// parentheses may contain spaces and parentheses, so the state is after the last ')'.
char proc_state(int pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re");
  if (f == nullptr) return '?';
  char buf[512];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close = strrchr(buf, ')');
  if (close == nullptr || close[1] != ' ') return '?';
  return close[2];
}

}  // namespace

PeerLiveness::PeerLiveness(int pid) : pid_(pid) {
  if (pid <= 0 || pid == getpid()) return;
  watch_ = true;
#ifdef SYS_pidfd_open
  pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  // On failure (ENOSYS, EPERM, or ESRCH: already gone) the fallback in exited() decides.
#endif
}

PeerLiveness::~PeerLiveness() {
  if (pidfd_ >= 0) close(pidfd_);
}

bool PeerLiveness::exited() const {
  if (!watch_) return false;
  if (pidfd_ >= 0) {
    struct pollfd pfd = {pidfd_, POLLIN, 0};
    return poll(&pfd, 1, 0) > 0;
  }
  if (kill(pid_, 0) != 0 && errno == ESRCH) return true;
  char state = proc_state(pid_);
  return state == 'Z' || state == 'X';
}

void PeerLiveness::throw_exited(int rank) const {
  throw_peer_error(cclRemoteError, rank, "rank %d (pid %d) exited", rank, pid_);
}

}  // namespace ccl::transport::shm
