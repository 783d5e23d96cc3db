// The direct collectives (algorithms/direct.h): every rank of one host reads its peers' data in
// place from their shared-memory mailboxes, no schedule. Run, not built.
#include "algorithms/direct.h"

#include <algorithm>

#include "core/tuning/entries/entries.h"

namespace ccl::tune::entries {

namespace {

// The direct broadcast, allgather and alltoall move data in pieces of this size, the readers'
// copies overlapping the writer's.
constexpr double kPiece = algo::DirectCollectives::kBroadcastPiece;

// The window: one host, shared memory, a mailbox that holds `footprint` bytes.
const char* no_window(const Shape& s, size_t footprint) {
  if (s.nhosts != 1) return "direct needs every rank on one host";
  if (!s.shm) return "direct needs shared memory";
  if (s.window_bytes == 0) return "no shared window";
  if (footprint > s.window_bytes) return "larger than the shared window";
  return nullptr;
}

// Only allreduce has two forms (one-shot = LL, two-shot = Simple); the others name theirs Simple.
const char* simple_only(const Shape& s, Protocol p, size_t bytes) {
  if (p == Protocol::LL) return "direct has Simple only here";
  return no_window(s, bytes);
}

const char* allreduce_fits(const Shape& s, Protocol, size_t bytes) { return no_window(s, bytes); }

// All-to-all publishes its whole buffer (a block per peer); a barrier moves nothing, so either
// protocol names the same thing.
const char* alltoall_fits(const Shape& s, Protocol, size_t bytes) {
  return no_window(s, bytes * static_cast<size_t>(s.nranks));
}
const char* barrier_fits(const Shape& s, Protocol, size_t) { return no_window(s, 0); }

// One-shot (LL): a rank copies its S into its mailbox (S/b), raises its flag and waits for the
// others' (one synchronisation, a), then reads and reduces the n-1 peers' vectors:
//   a_W + S/b_W + (n-1) S/g
// Two-shot (Simple): copy in (S/b), synchronise, reduce the own 1/n of all n vectors ((n-1)/n S
// reduced), synchronise, copy the other n-1 reduced pieces out:
//   2 a_W + S/b_W + (n-1)/n S/g + (n-1)/n S/b_W
double two_shot(const CostModel::Terms& t, double S) {
  const double rest = (t.n - 1) * S / t.n;
  return t.direct.a + t.direct.step(S) + t.reduce(rest) + rest * t.direct.inv;
}
double allreduce_cost(const CostModel& m, Protocol p, double S) {
  const CostModel::Terms& t = m.terms();
  return p == Protocol::LL ? t.direct.step(S) + (t.n - 1) * t.reduce(S) : two_shot(t, S);
}
// A reduce is a two-shot allreduce whose non-roots drop the result.
double reduce_cost(const CostModel& m, Protocol, double S) { return two_shot(m.terms(), S); }
// Broadcast: the root copies S into its mailbox in pieces, the others copy each piece out as soon
// as it is flagged, so the copies overlap but for one piece:  a_W + (S + min(S, piece))/b_W
double broadcast_cost(const CostModel& m, Protocol, double S) {
  return m.terms().direct.step(S + std::min(S, kPiece));
}
// Allgather (S = one rank's piece): each rank publishes its S in pieces and copies the n-1
// others' out, overlapping all but one piece:  a_W + ((n-1) S + min(S, piece))/b_W
double allgather_cost(const CostModel& m, Protocol, double S) {
  const CostModel::Terms& t = m.terms();
  return t.direct.step((t.n - 1) * S + std::min(S, kPiece));
}
// Alltoall (S = one block): each rank publishes its n blocks and copies its block out of the n-1
// others' mailboxes:  a_W + (n S + (n-1) S)/b_W, the publishing overlapping but for one piece:
//   a_W + ((n-1) S + min(n S, piece))/b_W
double alltoall_cost(const CostModel& m, Protocol, double S) {
  const CostModel::Terms& t = m.terms();
  return t.direct.step((t.n - 1) * S + std::min(t.n * S, kPiece));
}
// Barrier: one synchronisation of flags:  a_W
double barrier_cost(const CostModel& m, Protocol, double) { return m.terms().direct.a; }

void run_all_reduce(const RunArgs& r) {
  r.direct.all_reduce(r.input, r.output, r.count, r.op, r.deadline, r.label,
                      r.protocol == Protocol::LL);
}
void run_broadcast(const RunArgs& r) {
  r.direct.broadcast(r.input, r.output, r.bytes, r.root, r.deadline, r.label);
}
void run_all_gather(const RunArgs& r) {
  r.direct.all_gather(r.input, r.output, r.bytes, r.deadline, r.label);
}
void run_all_to_all(const RunArgs& r) {
  r.direct.all_to_all(r.input, r.output, r.bytes, r.deadline, r.label);
}
void run_barrier(const RunArgs& r) { r.direct.barrier(r.deadline, r.label); }

constexpr AlgorithmEntry kEntries[] = {
    {Collective::AllReduce, Algorithm::Direct, allreduce_fits, allreduce_cost, nullptr,
     run_all_reduce, true},
    {Collective::Reduce, Algorithm::Direct, simple_only, reduce_cost, nullptr, run_all_reduce,
     true},
    {Collective::Broadcast, Algorithm::Direct, simple_only, broadcast_cost, nullptr, run_broadcast,
     true},
    {Collective::AllGather, Algorithm::Direct, simple_only, allgather_cost, nullptr, run_all_gather,
     true},
    {Collective::AlltoAll, Algorithm::Direct, alltoall_fits, alltoall_cost, nullptr, run_all_to_all,
     true},
    {Collective::Barrier, Algorithm::Direct, barrier_fits, barrier_cost, nullptr, run_barrier,
     true},
};

}  // namespace

std::span<const AlgorithmEntry> direct() { return kEntries; }

}  // namespace ccl::tune::entries
