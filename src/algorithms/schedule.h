// An algorithm is data (DESIGN.md principle 1). A builder is a pure function that returns, for
// one rank, a Schedule: an ordered list of rounds, each a few steps. All steps of a round may run
// at once; a round starts when the previous one is complete. Messages between a pair of ranks
// match in the order they appear (round by round, then step by step).
//
// Regions are in elements, not bytes, so a schedule does not depend on the datatype, and carry no
// data: building the schedule of rank 12,345 of 16,384 needs no communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ccl::algo {

enum class Buffer : uint8_t {
  Input,    // the user's sendbuff
  Output,   // the user's recvbuff
  Scratch,  // executor-owned, `Schedule::scratch_elems` elements
  Slot,     // one of the caller's extra buffers, ExecBuffers::slots[Region::slot] (send/recv
            // groups: each operation has its own buffer)
};

struct Region {
  Buffer buffer = Buffer::Input;
  size_t offset = 0;  // elements
  size_t count = 0;   // elements
  uint32_t slot = 0;  // for Buffer::Slot only
  bool operator==(const Region&) const = default;
};

enum class StepKind : uint8_t {
  Send,        // send `src` to `peer`
  Recv,        // receive from `peer` into `dst`
  RecvReduce,  // receive from `peer`: dst = src (op) incoming; src may equal dst
  Copy,        // dst = src (local)
  Finalize,    // apply the op's final step to dst in place (avg: divide by nranks)
};

struct Step {
  StepKind kind = StepKind::Copy;
  int peer = -1;
  Region src;
  Region dst;
};

struct Round {
  std::vector<Step> steps;
};

struct Schedule {
  std::vector<Round> rounds;
  size_t scratch_elems = 0;
  size_t round_count() const { return rounds.size(); }
  size_t step_count() const;
  size_t memory_bytes() const;   // heap the schedule owns (capacity, not size)
  std::string describe() const;  // one line per step, for CCL_DEBUG=TRACE and test failures
};

// Splits `count` elements into `parts` near-equal contiguous pieces (the first count % parts
// pieces get one more). Pure; used by every builder and by tests.
struct Piece {
  size_t offset;
  size_t count;
};
Piece split_even(size_t count, size_t parts, size_t index);

// What every ring, chain and tree builder takes (RingParams and TreeParams are this struct).
struct ScheduleParams {
  int nranks = 1;
  int rank = 0;
  size_t count = 0;        // elements
  size_t chunk_elems = 0;  // 0: no chunking
  // Empty: the identity; else a permutation of 0..nranks-1: position i of the ring or tree holds
  // rank order[i] (the topology picks it).
  std::span<const int> order;
};

// A reduction over one rank: Input copied to Output (the executor skips the copy in place), then
// the op's final step.
Schedule single_rank_reduction(size_t count);

}  // namespace ccl::algo
