#include "core/recovery/agreement.h"

#include <poll.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/int_ranges.h"
#include "base/log.h"

namespace ccl::recovery {

namespace {

// How long the coordinator sleeps between looks at its watches and its submissions.
constexpr int kPollMs = 2;

bool reachable(const Agreement& a, int rank) {
  return a.listeners[static_cast<size_t>(rank)].port() != 0;
}

std::vector<int32_t> as_list(const std::set<int>& ranks) {
  return std::vector<int32_t>(ranks.begin(), ranks.end());
}

// A connection to `rank`'s listener that opened with `hello`; invalid if the rank is gone.
Socket open_to(const Agreement& a, int rank, Ask ask) {
  if (!reachable(a, rank)) return Socket();
  return open_with_hello(a.listeners[static_cast<size_t>(rank)],
                         make_hello(ask, a.comm, rank, a.self, a.seq), a.deadline);
}

Vote coordinate(const Agreement& a, const Vote& mine, std::set<int>& failed, const Decide& decide) {
  std::map<int, Socket> watches;
  for (int p : a.participants) {
    if (p == a.self || failed.contains(p)) continue;
    Socket s = open_to(a, p, Ask::kWatch);
    if (s.valid()) {
      watches.emplace(p, std::move(s));
    } else {
      failed.insert(p);
    }
  }
  std::map<int, Vote> votes{{a.self, mine}};
  std::optional<Vote> adopted;
  for (;;) {
    // The votes the listener filed for this agreement.
    {
      std::lock_guard lock(a.endpoint->mutex);
      for (const Endpoint::Submission& s : a.endpoint->submits[a.seq]) {
        votes[s.from] = s.vote;
        failed.insert(s.vote.failed.begin(), s.vote.failed.end());
      }
    }
    // The watches: a decision a participant holds already, or the end of its process.
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    for (auto& [p, s] : watches) {
      fds.push_back({s.fd(), POLLIN, 0});
      ranks.push_back(p);
    }
    if (!fds.empty() && ::poll(fds.data(), fds.size(), kPollMs) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const int p = ranks[i];
        Vote decision;
        Reply reply = Reply::kUnknown;
        try {
          reply = recv_reply(watches.at(p), &decision, a.deadline);
        } catch (const Error& e) {
          if (e.code() == cclTimeout) throw;
        }
        if (reply == Reply::kDecision) {
          adopted = std::move(decision);
        } else {
          failed.insert(p);
          votes.erase(p);
        }
        watches.erase(p);
      }
    } else if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
    }
    if (adopted) break;
    std::vector<int> waiting;
    for (int p : a.participants) {
      if (!failed.contains(p) && !votes.contains(p)) waiting.push_back(p);
    }
    if (waiting.empty()) break;
    if (a.deadline.expired()) {
      throw_error(cclTimeout,
                  "recovery agreement %llu: rank(s) %s are alive but did not take part before the "
                  "timeout",
                  static_cast<unsigned long long>(a.seq), format_int_ranges(waiting).c_str());
    }
  }
  Vote decision;
  if (adopted) {
    decision = std::move(*adopted);
  } else {
    std::map<int, Vote> live;
    for (auto& [p, v] : votes) {
      if (!failed.contains(p)) live.emplace(p, v);
    }
    decision = decide(live, failed);
  }
  CCL_INFO(
      kInit, "rank %d: recovery agreement %llu decided by rank %d%s: flag %d, failed [%s]", a.self,
      static_cast<unsigned long long>(a.seq), a.self, adopted ? " (adopted)" : "", decision.flag,
      format_int_ranges(std::vector<int>(decision.failed.begin(), decision.failed.end())).c_str());
  // Recording answers every participant that asked this rank (the endpoint holds their sockets).
  return a.endpoint->record(a.seq, decision);
}

}  // namespace

Vote decide_and(const std::map<int, Vote>& votes, const std::set<int>& failed) {
  Vote d;
  d.flag = ~0;
  std::set<int> all = failed;
  for (const auto& [p, v] : votes) {
    d.flag &= v.flag;
    all.insert(v.failed.begin(), v.failed.end());
  }
  d.failed = as_list(all);
  return d;
}

Vote agree(const Agreement& a, Vote mine, std::set<int> failed, const Decide& decide) {
  if (std::find(a.participants.begin(), a.participants.end(), a.self) == a.participants.end()) {
    throw_error(cclInternalError, "recovery agreement: rank %d is no participant", a.self);
  }
  for (;;) {
    {
      // A coordinator that died after telling some may have told this rank already.
      std::lock_guard lock(a.endpoint->mutex);
      auto it = a.endpoint->decided.find(a.seq);
      if (it != a.endpoint->decided.end()) return it->second;
    }
    auto coordinator = std::find_if(a.participants.begin(), a.participants.end(),
                                    [&](int p) { return !failed.contains(p); });
    if (*coordinator == a.self) {
      mine.failed = as_list(failed);
      return coordinate(a, mine, failed, decide);
    }
    const int c = *coordinator;
    Socket s = open_to(a, c, Ask::kSubmit);
    Vote decision;
    Reply reply = Reply::kUnknown;
    if (s.valid()) {
      mine.failed = as_list(failed);
      try {
        send_vote(s, mine, a.deadline);
        reply = recv_reply(s, &decision, a.deadline);
      } catch (const Error& e) {
        if (e.code() == cclTimeout) {
          throw_error(cclTimeout,
                      "recovery agreement %llu: no decision from rank %d (the coordinator) before "
                      "the timeout",
                      static_cast<unsigned long long>(a.seq), c);
        }
      }
    }
    if (reply == Reply::kDecision) return a.endpoint->record(a.seq, decision);
    CCL_INFO(kInit, "rank %d: recovery agreement %llu: coordinator rank %d is gone", a.self,
             static_cast<unsigned long long>(a.seq), c);
    failed.insert(c);
  }
}

bool listener_gone(const SocketAddress& listener, Deadline deadline) {
  if (listener.port() == 0) return false;
  try {
    return !Socket::connect_once(listener, deadline).valid();
  } catch (const Error&) {
    return false;
  }
}

}  // namespace ccl::recovery
