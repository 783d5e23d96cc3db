// Symbolic execution of a collective's schedules (one per rank), checking that they are correct
// for every datatype and op without moving a byte.
//
// The ranks run in lockstep like the real executor: a rank posts all steps of its current round
// (a Send snapshots its data and completes at once, i.e. eager buffering, or, with
// Problem::rendezvous, once matched; Copy and Finalize happen at once), and the round completes
// when each of its receives has matched a message. Messages between a pair of ranks match first-in
// first-out. If no rank can move while some still have rounds left, that is a deadlock.
//
// Checked on the way: regions within their buffers (Scratch within scratch_elems), peers valid,
// matched sends and receives of equal element counts, no two steps of one round touching the same
// memory when one of them writes it, nothing written to Input (sendbuff is const), no access to a
// buffer the caller may pass as NULL, no reduction reading garbage or finalized data, no Finalize
// of garbage or of finalized data. At the end: no message left unreceived, each rank's Output
// holds exactly the expected formula (see symbolic_buffer.h), and, when asked, every rank's
// completion depends through messages on every rank's arrival (barrier).
//
// In-place calls are modelled by placing Input and Output in one memory, so a schedule that reads
// an Input element after its Output alias was overwritten computes the wrong formula and fails.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "symbolic_buffer.h"

namespace ccl::algo::verify {

// Output[offset, offset+count) must end up holding `value` (deltas relative to each element's
// own position in Output).
struct Expectation {
  size_t offset = 0;
  size_t count = 0;
  Value value;
};

struct RankSetup {
  size_t input_elems = 0;
  size_t output_elems = 0;
  bool input_usable = true;   // false: the caller may pass sendbuff = NULL; any use is an error
  bool output_usable = true;  // false: the caller may pass recvbuff = NULL
  // In-place: Input and Output are windows of one memory, at these element offsets in it.
  bool in_place = false;
  size_t input_base = 0;
  size_t output_base = 0;
  std::vector<Expectation> expect;  // Output elements not covered may hold anything
};

struct Problem {
  std::vector<RankSetup> ranks;  // one per rank; the size is nranks
  bool full_dependency = false;  // every rank's completion must depend on every rank's arrival
  // false: a send completes when posted (the transport buffers it). true: only once the receiver
  // has matched it (rendezvous, no buffering), which finds schedules that rely on buffering to
  // avoid a deadlock. The results are the same either way; only deadlocks differ.
  bool rendezvous = false;
};

// "" when all checks pass, otherwise the first problem found, with the rank, round and step.
std::string verify(const std::vector<Schedule>& schedules, const Problem& problem);

// Problems for the collectives, with NCCL's in-place conventions (API.md). Input of rank r
// element i is written in<r>[i]; "reduced" means every rank's contribution exactly once.
Problem allreduce_problem(int nranks, size_t count, bool in_place);
// The allreduce problem out of place, then in place, both with rendezvous sends (which also proves
// that no send relies on buffering): "" or the first failure, prefixed "in place: " for that one.
std::string verify_allreduce(const std::vector<Schedule>& schedules, int nranks, size_t count);
Problem broadcast_problem(int nranks, size_t count, int root, bool in_place);
Problem reduce_problem(int nranks, size_t count, int root, bool in_place);
Problem allgather_problem(int nranks, size_t sendcount, bool in_place);
Problem reducescatter_problem(int nranks, size_t recvcount, bool in_place);
Problem alltoall_problem(int nranks, size_t count);
// Rank q's counts[q] elements land at Output + displs[q] on every rank; Output is as long as the
// last piece's end. In place, Input is Output + displs[rank]. The gaps between pieces must stay
// untouched (expected to hold their garbage).
Problem allgatherv_problem(int nranks, std::span<const size_t> counts,
                           std::span<const size_t> displs, bool in_place);
// Matrices indexed [rank][peer]: rank r's block for q is sendcounts[r][q] elements at Input +
// sdispls[r][q], and lands on rank q at Output + rdispls[q][r] (so rank q's recvcounts[r] is
// sendcounts[r][q]). Input and Output are as long as their last block's end; Output gaps must stay
// untouched. Not in place (the communicator copies the input away first).
using Matrix = std::vector<std::vector<size_t>>;
Problem alltoallv_problem(const Matrix& sendcounts, const Matrix& sdispls, const Matrix& rdispls);
Problem barrier_problem(int nranks);

}  // namespace ccl::algo::verify
