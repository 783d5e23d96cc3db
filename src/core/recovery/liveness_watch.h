// Watches some ranks' processes through their recovery listeners (recovery_listener.h): a held
// connection to each, whose end means the process is gone. A connection can also end because the
// rank let go of the communicator it was held for; a refused new connection tells the two apart
// (asked again for a while: a dying process may close the held connection a moment before its
// listener).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "core/bootstrap/socket.h"
#include "core/recovery/recovery_wire.h"

namespace ccl::recovery {

class LivenessWatch {
 public:
  // Holds a connection to the listener of each of `ranks` (listeners by rank), filed with rank
  // r's endpoint of communicator `comm`; `deadline` bounds the connects.
  LivenessWatch(const std::vector<SocketAddress>& listeners, const std::vector<int>& ranks,
                const CommName& comm, int self, Deadline deadline);
  // Waits up to `wait` for news; returns a rank whose process is gone, or -1.
  int first_gone(std::chrono::milliseconds wait);

 private:
  const std::vector<SocketAddress>& listeners_;
  std::map<int, Socket> held_;
  std::map<int, Clock::time_point> suspects_;  // connection ended, listener answered: next ask
  std::vector<int> gone_;                      // found gone while connecting
};

}  // namespace ccl::recovery
