#include "core/recovery/liveness_watch.h"

#include <poll.h>

#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "core/recovery/agreement.h"
#include "core/recovery/recovery_wire.h"

namespace ccl::recovery {

namespace {
// How long a refused-or-not probe may take before the rank counts as alive.
constexpr auto kProbe = std::chrono::milliseconds(200);
// How often a suspect's listener is asked again.
constexpr auto kProbeAgain = std::chrono::milliseconds(5);
}  // namespace

LivenessWatch::LivenessWatch(const std::vector<SocketAddress>& listeners,
                             const std::vector<int>& ranks, const CommName& comm, int self,
                             Deadline deadline)
    : listeners_(listeners) {
  for (int r : ranks) {
    const SocketAddress& to = listeners[static_cast<size_t>(r)];
    if (to.port() == 0) continue;  // no listener: nothing to watch
    Socket s = open_with_hello(to, make_hello(Ask::kHold, comm, r, self, 0), deadline);
    if (s.valid()) {
      held_.emplace(r, std::move(s));
    } else {
      CCL_INFO(kInit, "rank %d: liveness watch: rank %d's listener refuses: gone", self, r);
      gone_.push_back(r);
    }
  }
}

int LivenessWatch::first_gone(std::chrono::milliseconds wait) {
  if (!gone_.empty()) return gone_.front();
  // Suspects: their connection ended but their listener still answered. A dying process closes
  // its descriptors one by one, so the listener can outlive the held connection by a moment:
  // ask again until it refuses (gone) or the watch ends (it let go of the communicator).
  for (auto it = suspects_.begin(); it != suspects_.end(); ++it) {
    if (Clock::now() < it->second) continue;
    if (listener_gone(listeners_[static_cast<size_t>(it->first)], Deadline::after(kProbe))) {
      const int r = it->first;
      CCL_INFO(kInit, "liveness watch: rank %d's listener refuses now: gone", r);
      suspects_.erase(it);
      gone_.push_back(r);
      return r;
    }
    it->second = Clock::now() + kProbeAgain;
  }
  if (held_.empty()) {
    std::this_thread::sleep_for(wait);
    return -1;
  }
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (auto& [r, s] : held_) {
    fds.push_back({s.fd(), POLLIN, 0});
    ranks.push_back(r);
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) <= 0) return -1;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const int r = ranks[i];
    held_.erase(r);
    // Ended: the process died, or the rank let go of the communicator (then it still listens).
    const bool gone = listener_gone(listeners_[static_cast<size_t>(r)], Deadline::after(kProbe));
    CCL_INFO(kInit, "liveness watch: rank %d's connection ended; its listener %s", r,
             gone ? "refuses: gone" : "answers: asking again");
    if (gone) {
      gone_.push_back(r);
      return r;
    }
    suspects_.emplace(r, Clock::now() + kProbeAgain);
  }
  return -1;
}

}  // namespace ccl::recovery
