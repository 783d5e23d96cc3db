// An algorithm is data (docs/design-notes.md, "Schedules"). A builder is a pure function that
// returns, for one rank, a Schedule: an ordered list of rounds, each a few steps. All steps of a
// round may run at once; a round starts when the previous one is complete. Messages between a pair
// of ranks match in the order they appear (round by round, then step by step).
//
// Regions are in elements, not bytes, so a schedule does not depend on the datatype, and carry no
// data: building the schedule of rank 12,345 of 16,384 needs no communicator. Schedule (below)
// stores the steps compactly; Step and Region are the values builders add and readers get.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
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
  bool operator==(const Step&) const = default;
};

// One rank's schedule. Builders append steps with add() and close each round with end_round();
// readers see rounds() (a view: rounds, each a range of steps decoded on the fly, no allocation).
//
// The encoding ("schedules cheap at scale", docs/design-notes.md): all steps in one flat vector of
// 32-byte records and the rounds as a vector of end offsets into it, instead of a vector of 72-byte
// steps per round. A record holds both regions with one count (each region's count is it or 0) and,
// for a send or receive of a Slot, the slot in the unused region's offset; a Step with more (two
// different non-zero counts, two slots) is kept whole in a side vector that its record points to.
// Every Step reads back exactly as it was added.
//
// Measured by perf/micro/schedule_bench (one rank of 16,384, 256 Mi floats in 1 MiB chunks, on a
// loaded 2-core machine): ring allreduce, 65,533 steps in 32,767 rounds, 6-8 ms and 5.25 MiB as a
// vector of rounds of 72-byte steps, now 0.9-1.4 ms and 2.1 MiB; double binary tree, 4,096 steps,
// 0.10 ms and 0.31 MiB, now 0.05 ms and 0.13 MiB. Reading every step (the executor's walk): the
// ring's about 2 ns a step before and after, the tree's (in cache) 1.1 ns before, 1.7 ns now.
class Schedule {
 public:
  class Round;
  class Rounds;

  size_t scratch_elems = 0;

  // Building. add() appends a step to the open round; end_round() closes it (a round left empty
  // is dropped: it would cost a pass through the executor for nothing). Steps added after the
  // last end_round() are in no round yet. reserve() takes the expected totals.
  void add(const Step& step);
  void add_round(std::initializer_list<Step> steps) {
    for (const Step& st : steps) add(st);
    end_round();
  }
  void end_round();
  void reserve(size_t steps, size_t rounds);

  // Reading: the rounds in order, each a range of steps (a round is never empty). Views and
  // their steps are values decoded on the fly, valid while the schedule lives unchanged.
  Rounds rounds() const;
  Round round(size_t r) const;
  size_t round_count() const { return round_end_.size(); }
  size_t step_count() const { return round_end_.empty() ? 0 : round_end_.back(); }
  size_t memory_bytes() const;   // heap the schedule owns (capacity, not size)
  std::string describe() const;  // one line per step, for CCL_DEBUG=TRACE and test failures

 private:
  // A forward iterator over positions i of the schedule, yielding (schedule.*Get)(i).
  template <typename Value, Value (Schedule::*Get)(size_t) const>
  class Cursor;

  // 32 bytes: both regions, sharing one count (a region's `counted` flag off: it has 0 elements).
  // kSlotInSrc/kSlotInDst: a one-region step whose region (src/dst) is in a Slot, that slot held
  // in the other region's offset field (the other region is Region{}). kWide: the step is
  // wide_[count].
  struct Packed {
    uint64_t count = 0;
    uint64_t src_offset = 0;
    uint64_t dst_offset = 0;
    int32_t peer = -1;
    StepKind kind = StepKind::Copy;
    Buffer src_buffer = Buffer::Input;
    Buffer dst_buffer = Buffer::Input;
    uint8_t flags = 0;
  };
  static_assert(sizeof(Packed) == 32);
  static constexpr uint8_t kSrcCounted = 1, kDstCounted = 2, kSlotInSrc = 4, kSlotInDst = 8,
                           kWide = 16;

  Step rare_step(const Packed& p) const;
  Step step(size_t i) const;

  std::vector<Packed> packed_;
  std::vector<Step> wide_;
  std::vector<uint32_t> round_end_;  // round r is packed_[round_end_[r-1], round_end_[r])
};

template <typename Value, Value (Schedule::*Get)(size_t) const>
class Schedule::Cursor {
 public:
  using value_type = Value;
  using difference_type = std::ptrdiff_t;
  Cursor() = default;
  Cursor(const Schedule* s, size_t i) : s_(s), i_(i) {}
  Value operator*() const { return (s_->*Get)(i_); }
  Cursor& operator++() {
    ++i_;
    return *this;
  }
  Cursor operator++(int) {
    Cursor old = *this;
    ++i_;
    return old;
  }
  bool operator==(const Cursor&) const = default;

 private:
  const Schedule* s_ = nullptr;
  size_t i_ = 0;
};

// The steps of one round, in order.
class Schedule::Round {
 public:
  using iterator = Cursor<Step, &Schedule::step>;
  Round(const Schedule* s, size_t begin, size_t end) : s_(s), begin_(begin), end_(end) {}
  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }
  Step operator[](size_t i) const { return s_->step(begin_ + i); }
  Step back() const { return s_->step(end_ - 1); }
  iterator begin() const { return iterator(s_, begin_); }
  iterator end() const { return iterator(s_, end_); }

 private:
  const Schedule* s_;
  size_t begin_, end_;
};

// The rounds, in order.
class Schedule::Rounds {
 public:
  using iterator = Cursor<Round, &Schedule::round>;
  explicit Rounds(const Schedule* s) : s_(s) {}
  size_t size() const { return s_->round_count(); }
  bool empty() const { return size() == 0; }
  Round operator[](size_t r) const { return s_->round(r); }
  Round back() const { return s_->round(size() - 1); }
  iterator begin() const { return iterator(s_, 0); }
  iterator end() const { return iterator(s_, size()); }

 private:
  const Schedule* s_;
};

inline Schedule::Rounds Schedule::rounds() const { return Rounds(this); }

inline Schedule::Round Schedule::round(size_t r) const {
  return Round(this, r == 0 ? 0 : round_end_[r - 1], round_end_[r]);
}

// The executor's hot path: no branch but one that collectives always take the same way.
inline Step Schedule::step(size_t i) const {
  const Packed& p = packed_[i];
  if ((p.flags & (kSlotInSrc | kSlotInDst | kWide)) != 0) return rare_step(p);
  Step st;
  st.kind = p.kind;
  st.peer = p.peer;
  st.src = Region{p.src_buffer, p.src_offset, (p.flags & kSrcCounted) != 0 ? p.count : 0};
  st.dst = Region{p.dst_buffer, p.dst_offset, (p.flags & kDstCounted) != 0 ? p.count : 0};
  return st;
}

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
