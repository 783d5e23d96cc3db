// Collectives that read the peers' data where it lies, through a SharedWindow
// (transport/shared_window.h), for ranks that all share memory. No message ring, no per-step
// handshake: a rank copies its input into its own mailbox once, raises its flag, and reads the
// others' mailboxes. For small and medium messages this removes most of the per-call cost of the
// ring (every ring step is a message with its own header, counters and wake-up check).
//
// The protocol (each rank numbers its direct operations s = 1, 2, ...; all ranks run the same
// operations in the same order, so their numbers agree):
//   - operation s uses the mailboxes of parity p = s % 2; its flag values are mark(s, k) =
//     s * 2^20 + k for its steps k: k = 0 "my input is in my mailbox" (or, for a broadcast
//     receiver, "I have the data"), k = 1 "my reduced chunk is in my mailbox" (two-shot), and
//     for a broadcast root k = 1, 2, ... "the first k pieces are in my mailbox". Flags only grow.
//   - before writing its mailbox of parity p, a rank waits until every peer's flag reached
//     mark(s-1, 0): a peer raises that flag only after it finished operation s-2, the last one
//     that read this rank's parity-p mailbox. (Inside an allreduce this always holds already.)
// Allreduce: one-shot (every rank reduces the whole vector, reading all mailboxes) or two-shot
// (rank r reduces chunk r into its mailbox, then everyone gathers the chunks), as the caller (the
// tuner) says; a message in the inline area is always one-shot. Broadcast: the root copies its data
// into its mailbox piece by piece and the others copy each piece out as soon as it is there, so the
// two copies overlap. Every rank adds the contributions in rank order 0, 1, ..., n-1, so all ranks
// get bit-identical results, as with the ring.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "algorithms/executor.h"
#include "algorithms/memory_kernels.h"
#include "base/deadline.h"
#include "transport/shared_window.h"

namespace ccl::algo {

class DirectCollectives {
 public:
  DirectCollectives(transport::SharedWindow* window, WaitPolicy policy, const AbortFlag* abort)
      : window_(window),
        policy_(policy),
        abort_(abort),
        // The numbering continues from the own flags: the window's state is all in shared
        // memory, so a new instance over a used window goes on where the last one stopped.
        sequence_(std::max(window->flag(window->rank(), 0), window->flag(window->rank(), 1)) >>
                  kStepBits) {}

  static constexpr unsigned kStepBits = 20;
  static uint64_t mark(uint64_t sequence, uint64_t step) { return (sequence << kStepBits) | step; }
  // Broadcast pieces: big enough that a flag per piece costs nothing, small enough to overlap.
  static constexpr size_t kBroadcastPiece = 64 * 1024;

  // The largest message (bytes) these collectives take.
  size_t max_bytes() const { return window_->capacity(); }

  // One-shot or two-shot as `one_shot` says; a message in the inline area has no chunks to
  // split and is always one-shot.
  void all_reduce(const void* input, void* output, size_t count, const ExecOp& op,
                  Deadline deadline, const OpLabel& what, bool one_shot);
  void broadcast(const void* input, void* output, size_t bytes, int root, Deadline deadline,
                 const OpLabel& what);
  void barrier(Deadline deadline, const OpLabel& what);
  // Every rank publishes its `bytes` (in broadcast-sized pieces, flagged one by one) and copies
  // the others' pieces out; output holds nranks * bytes. In place when input == output + rank *
  // bytes.
  void all_gather(const void* input, void* output, size_t bytes, Deadline deadline,
                  const OpLabel& what);
  // Blocks of `bytes` per rank pair: each rank publishes the blocks for its peers (the one for
  // rank me+1 first, then me+2, ...), piece by piece, and copies its own block out of every peer's
  // mailbox. In place (input == output) is fine: all blocks are published before any is received.
  void all_to_all(const void* input, void* output, size_t bytes, Deadline deadline,
                  const OpLabel& what);

  // Broadcast between buffers in registered memory (cclMemAlloc): each receiver copies straight
  // from the root's buffer, and an in-place root, which has no copy of its own to make, writes a
  // share of every registered receiver's output itself: one copy per byte, split over the cores.
  // The ranks first agree (two flag exchanges) that the root's buffer is registered and every
  // receiver could map it; false if not (the operation then did nothing: use broadcast()).
  // `region`: the registration (registered_region.h) of the buffer this rank offers — the
  // root's input, a receiver's output — or nullptr if it has none.
  bool broadcast_registered(const void* input, void* output, size_t bytes, int root,
                            Deadline deadline, const OpLabel& what,
                            const transport::RegisteredRegion* region);
  // Whether the receivers of a large out-of-place broadcast read a share of the root's input
  // from its process (direct_cma.cc): known after the first such broadcast. For tests and logs.
  bool reads_root_memory() const { return cma_ > 0; }
  // Below this size the agreement costs more than the copy it saves.
  static constexpr size_t kRegisteredBroadcastMin = 256 * 1024;
  // From this size an out-of-place broadcast lets the receivers read a share of the root's input
  // straight from its process (direct_cma.cc), where every rank can.
  static constexpr size_t kCmaBroadcastMin = 256 * 1024;

 private:
  // Starts operation s: waits until the own parity-p mailbox may be written; returns p.
  unsigned begin(Deadline deadline, const OpLabel& what);
  // Until flag(rank, parity) >= value: spin, then yield, then sleep (WaitPolicy).
  void await(int rank, unsigned parity, uint64_t value, Deadline deadline, const OpLabel& what);
  void await_all(unsigned parity, uint64_t value, Deadline deadline, const OpLabel& what);
  // Pieces of kBroadcastPiece bytes: put_pieces copies `bytes` into our mailbox area `box`,
  // raising our flag to mark(s, first_step + k + 1) after piece k (and waking sleepers after each
  // piece if `flush_each`); get_pieces copies them out of `rank`'s area `box` as they are flagged.
  static size_t pieces_of(size_t bytes);
  void put_pieces(std::byte* box, const std::byte* src, size_t bytes, unsigned parity,
                  uint64_t first_step, bool flush_each);
  void get_pieces(std::byte* dst, int rank, const std::byte* box, size_t bytes, unsigned parity,
                  uint64_t first_step, Deadline deadline, const OpLabel& what);
  // Cross-memory attach (direct_cma.cc): whether every rank can read every other's memory, found
  // once by a collective probe (an operation of its own) and remembered.
  bool cma_usable(Deadline deadline, const OpLabel& what);
  // The tail of an out-of-place broadcast that the receivers read from the root's input.
  static size_t cma_share(size_t bytes);
  const std::byte* own_contribution(const std::byte* in, const std::byte* out,
                                    const std::byte* mine) const;
  void reduce_range(std::byte* dst, size_t offset, size_t count, unsigned parity, size_t bytes,
                    const std::byte* own, const ExecOp& op);

  transport::SharedWindow* window_;
  // Every byte moved here goes through the host row of the kernel table (memory_kernels.h): the
  // window is host memory, and the registry offers the direct entries only for host buffers.
  const MemoryKernels* kernels_ = kernels_for(MemoryKind::Host);
  WaitPolicy policy_;
  const AbortFlag* abort_;
  uint64_t sequence_ = 0;
  int cma_ = 0;  // cma_usable's answer: 0 not asked yet, 1 yes, -1 no
};

}  // namespace ccl::algo
