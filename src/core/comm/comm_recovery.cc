// Recovering from a failed rank (API.md): revoke, agree, the failed ranks, shrink. All of it runs
// over the recovery plane (core/recovery/): the transports of a communicator that lost a rank may
// hold half a message of the operation that failed, and are never used again.
//
// A shrink makes its communicator afresh among the survivors: the lowest survivor opens a
// rendezvous and its address travels in the agreement's decision; the survivors join it as
// cclCommInitRank would, with the parent's link figures (no probe). Reusing the parent's
// connections would need every ring and socket resynchronized after an aborted operation; a fresh
// join of 8 local ranks takes about 0.1 s here, well inside the 1 s a recovery may take.
#include <algorithm>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/int_ranges.h"
#include "base/log.h"
#include "core/bootstrap/tcp_store.h"
#include "core/comm/comm.h"
#include "core/recovery/liveness_watch.h"

namespace ccl {

namespace {

// How long a revoke waits for each peer's listener before it goes on without it.
constexpr auto kRevokePerPeer = std::chrono::milliseconds(500);
// How long cclCommGetFailedRanks asks the listeners of a failed communicator.
constexpr auto kProbeBudget = std::chrono::milliseconds(1000);

}  // namespace

void Communicator::revoked_by(int by) {
  // Every survivor of a failure usually revokes: only the first one is news.
  if (status_.revoke(by)) {
    CCL_WARN(kInit, "rank %d: communicator revoked by rank %d", rank(), by);
  } else {
    CCL_INFO(kInit, "rank %d: communicator revoked by rank %d too", rank(), by);
  }
  abort();
}

void Communicator::revoke() {
  async_.wait_initialized("cclCommRevoke");
  status_.revoke(rank());
  abort();
  recovery_.spread_revoke(kRevokePerPeer, Deadline::after(options_.timeout));
}

std::unique_lock<std::timed_mutex> Communicator::quiesce(const char* what) {
  std::unique_lock<std::timed_mutex> lock;
  if (!runner_.lock_by(lock, Deadline::after(options_.timeout))) {
    throw_error(cclTimeout, "%s: an operation of the communicator still runs after %lld ms", what,
                static_cast<long long>(options_.timeout.count()));
  }
  return lock;
}

int Communicator::agree(int flag) {
  async_.wait_initialized("cclCommAgree");
  std::lock_guard lock(recovery_.mutex());
  const std::set<int> known = recovery_.failed();
  std::vector<int> participants;
  for (int r = 0; r < nranks(); ++r) {
    if (!known.contains(r)) participants.push_back(r);
  }
  recovery::Vote mine;
  mine.flag = flag;
  const recovery::Vote decision =
      recovery::agree(recovery_.next_agreement(participants, Deadline::after(options_.timeout)),
                      mine, known, recovery::decide_and);
  recovery_.note_failed(decision.failed);
  return decision.flag;
}

std::vector<int> Communicator::failed_ranks() {
  async_.wait_initialized("cclCommGetFailedRanks");
  if (status_.error() != cclSuccess) recovery_.probe(kProbeBudget);
  const std::set<int> failed = recovery_.failed();
  return {failed.begin(), failed.end()};
}

std::shared_ptr<const tune::Figures> Communicator::figures() const {
  return std::make_shared<const tune::Figures>(planner_.tuner().figures());
}

std::shared_ptr<Communicator> Communicator::shrink(std::span<const int> exclude, bool abort_first,
                                                   const CommOptions& options) {
  const char* what = "cclCommShrink";
  async_.wait_initialized(what);
  if (options_.loopback) {
    throw_error(cclInvalidUsage,
                "%s: a loopback communicator (ranks as threads, for tests) "
                "cannot shrink",
                what);
  }
  if (abort_first) {
    abort();  // what runs here ends within a wait slice
  } else {
    drain_background();
  }
  const std::unique_lock op = quiesce(what);
  std::lock_guard lock(recovery_.mutex());

  // Who takes part: every rank not excluded (not known dead either, when the excluded set is
  // the dead ones).
  const bool discover = exclude.empty() && abort_first;
  const std::set<int> excluded(exclude.begin(), exclude.end());
  const std::set<int> known = recovery_.failed();
  std::vector<int> participants;
  for (int r = 0; r < nranks(); ++r) {
    if (!excluded.contains(r) && !(discover && known.contains(r))) participants.push_back(r);
  }
  const Deadline deadline = Deadline::after(options_.timeout);
  const std::chrono::milliseconds child_timeout = options.timeout;
  auto decide = [&](const std::map<int, recovery::Vote>& votes, const std::set<int>& failed) {
    recovery::Vote d = recovery::decide_and(votes, failed);
    d.flag = 1;
    for (int p : participants) {
      // An explicit list left out a rank that is dead: every survivor fails, and may retry.
      if (failed.contains(p) && !discover) d.flag = 0;
    }
    if (d.flag != 0) {
      const cclUniqueId id = start_adopted_rendezvous(child_timeout);
      d.extra.assign(id.internal, id.internal + sizeof(id.internal));
    }
    return d;
  };
  recovery::Vote mine;
  mine.flag = 1;
  const recovery::Vote decision =
      recovery::agree(recovery_.next_agreement(participants, deadline), mine, known, decide);
  recovery_.note_failed(decision.failed);
  const std::set<int> failed(decision.failed.begin(), decision.failed.end());
  std::vector<int> survivors, lost;
  for (int p : participants) (failed.contains(p) ? lost : survivors).push_back(p);
  if (decision.flag == 0) {
    throw_peer_error(cclRemoteError, lost.front(),
                     "%s: rank(s) %s failed, but the list of excluded ranks did not name them; "
                     "call %s again without them (cclCommGetFailedRanks lists them)",
                     what, format_int_ranges(lost).c_str(), what);
  }
  if (decision.extra.size() != sizeof(cclUniqueId::internal)) {
    throw_error(cclInternalError, "%s: the decision carries %zu bytes, not a unique id", what,
                decision.extra.size());
  }

  // Join the survivors' communicator, watching them: one that dies now fails the join at once.
  CommOptions child = options;
  child.rank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), rank()) - survivors.begin());
  child.nranks = static_cast<int>(survivors.size());
  child.figures = figures();
  cclUniqueId id;
  memcpy(id.internal, decision.extra.data(), sizeof(id.internal));
  CCL_INFO(kInit, "%s: rank %d of %d is rank %d of %d (ranks %s left out)", what, rank(), nranks(),
           child.rank, child.nranks,
           format_int_ranges(std::vector<int>(failed.begin(), failed.end())).c_str());
  std::shared_ptr<Communicator> comm =
      create_async(child, AsyncState::through_unique_id(id, child.rank, child.nranks));
  std::vector<int> others;
  for (int s : survivors) {
    if (s != rank()) others.push_back(s);
  }
  std::string why;
  {
    recovery::LivenessWatch watch(recovery_.listeners(), others, recovery_.name(), rank(),
                                  Deadline::after(options_.timeout));
    while (comm->async_.initializing()) {
      if (const int gone = watch.first_gone(std::chrono::milliseconds(2)); gone >= 0) {
        recovery_.note_failed({gone});
        comm->abort();  // its init gives up within a wait slice
        why = "rank " + std::to_string(gone) + " died while the survivors joined";
        break;
      }
    }
  }
  try {
    comm->async_.wait_initialized(what);
  } catch (const Error& e) {
    // A peer or the network failed (one survivor's abort can reach the others as any
    // transport error): the agreement settled every argument.
    if (why.empty()) why = std::string("the join failed: ") + e.what();
  }
  // Every survivor keeps the new communicator, or none does: a survivor whose join failed (it saw
  // a death first) while others completed theirs would otherwise leave two groups that each
  // believe they recovered.
  recovery::Vote joined;
  joined.flag = why.empty() ? 1 : 0;
  const recovery::Vote outcome =
      recovery::agree(recovery_.next_agreement(survivors, Deadline::after(options_.timeout)),
                      joined, recovery_.failed(), recovery::decide_and);
  recovery_.note_failed(outcome.failed);
  if (outcome.flag == 0) {
    comm->abort();
    if (why.empty()) why = "another survivor's join failed";
    throw_error(cclRemoteError, "%s: %s; call %s again", what, why.c_str(), what);
  }
  return comm;
}

}  // namespace ccl
