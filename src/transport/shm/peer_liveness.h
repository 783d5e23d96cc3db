// Is a peer process still alive? Polled by Transport::wait() for peers that have pending work,
// so a rank killed mid-collective is noticed within one wait slice instead of at the timeout.
#pragma once

namespace ccl::transport::shm {

class PeerLiveness {
 public:
  // pid <= 0 (unknown) or our own pid (ranks as threads): always alive.
  explicit PeerLiveness(int pid);
  ~PeerLiveness();
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;

  int pid() const { return pid_; }
  // Non-blocking. A pidfd (Linux 5.3+) turns readable when the process exits, even as an unreaped
  // zombie and without pid-reuse races; otherwise kill(pid, 0) and /proc/<pid>/stat (Z or X).
  bool exited() const;
  // RemoteError "rank R (pid P) exited", blaming `rank` (the rank this process was).
  [[noreturn]] void throw_exited(int rank) const;

 private:
  int pid_;
  int pidfd_ = -1;
  bool watch_ = false;
};

}  // namespace ccl::transport::shm
