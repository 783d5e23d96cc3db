// A stranger process for hostile_check: it finds every TCP socket a rank listens on (through
// /proc/<pid>/fd and /proc/net/tcp{,6}, so it needs nothing from the library) and attacks each
// with wrong secrets, garbage, half hellos, slow trickles and floods of held connections, until
// it is told to stop.
#pragma once

#include <sys/types.h>

namespace ccl::hostile {

struct AttackReport {
  long tried = 0;      // connections attempted
  long dropped = 0;    // closed or reset by the rank
  long refused = 0;    // connect failed (the listener was gone)
  long answered = 0;   // the rank sent bytes back: it took a stranger for a peer
  long held = 0;       // still open when the attacker closed them (e.g. a listener whose
                       // setup was over, where the kernel's backlog keeps them)
  long listeners = 0;  // distinct listening sockets attacked
  long wildcard = 0;   // of those, bound to every address (0.0.0.0 or ::)
  bool ok = false;     // the report arrived
};

class Attacker {
 public:
  // Forks the attacker, aimed at process `target`.
  explicit Attacker(pid_t target);
  ~Attacker();
  Attacker(const Attacker&) = delete;
  Attacker& operator=(const Attacker&) = delete;

  // True once the attacker has launched its first wave at some listener of the target.
  bool wait_first_wave(int timeout_ms);
  // Stops the attacker and collects its report.
  AttackReport stop(int timeout_ms);

 private:
  pid_t pid_ = -1;
  int stop_fd_ = -1;    // closing it tells the attacker to stop
  int ready_fd_ = -1;   // one byte after the first wave
  int report_fd_ = -1;  // the AttackReport
};

}  // namespace ccl::hostile
