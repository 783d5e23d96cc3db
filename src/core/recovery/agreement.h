// A fault-tolerant agreement over the recovery plane (recovery_listener.h): every participant that
// returns gets the same decision, even when participants die during it (MPIX_Comm_agree's
// guarantee, for the ranks that are alive at the end).
//
// The coordinator is the lowest participant not known to have failed. Each other participant
// sends it its vote and waits for the decision; a refused connection or an end of stream means
// the coordinator died, and the participant tries the next one. The coordinator watches every
// participant it waits for (a connection to that rank's listener): it learns of a death from the
// connection's end, and of a decision the participant already holds (from a coordinator that
// died after telling only some) from the listener's answer, which it then adopts instead of
// deciding anew. Decisions are recorded in each rank's endpoint, which answers late askers. Every
// wait is bounded by the deadline: a participant that is alive but never takes part is a Timeout
// naming it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "core/bootstrap/socket.h"
#include "core/recovery/recovery_listener.h"
#include "core/recovery/recovery_wire.h"

namespace ccl::recovery {

struct Agreement {
  CommName comm;
  int self = -1;
  std::vector<SocketAddress> listeners;  // by rank; port 0: that rank has no listener
  std::shared_ptr<Endpoint> endpoint;    // this rank's
  uint64_t seq = 0;                      // the same on every participant
  std::vector<int> participants;         // increasing; `self` among them
  Deadline deadline = Deadline::never();
};

// The coordinator's rule: the decision from the votes of the participants still alive (its own
// included) and the ranks known to have failed.
using Decide = std::function<Vote(const std::map<int, Vote>& votes, const std::set<int>& failed)>;

// Runs agreement `a` with this rank's vote; `failed`: the ranks already known to have failed.
// Returns the decision every surviving participant returns.
Vote agree(const Agreement& a, Vote mine, std::set<int> failed, const Decide& decide);

// The usual rule: the bitwise AND of the flags, and every failure anyone saw.
Vote decide_and(const std::map<int, Vote>& votes, const std::set<int>& failed);

// Whether rank `rank`'s process is gone: its listener refuses a connection. False while it
// accepts (alive) and when it does not answer by the deadline (unknown).
bool listener_gone(const SocketAddress& listener, Deadline deadline);

}  // namespace ccl::recovery
