#include "algorithms/direct.h"

#include <sched.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "base/error.h"

namespace ccl::algo {

namespace {

// Chunk boundaries of the two-shot allreduce: multiples of 64 bytes, so every rank's chunk starts
// on a cache line of its own (no two ranks write one line) and is element-aligned.
size_t chunk_start(size_t count, size_t elem_size, int nranks, int index) {
  size_t align = 64 / elem_size;
  size_t per = (count + nranks - 1) / nranks;
  per = (per + align - 1) / align * align;
  size_t start = per * static_cast<size_t>(index);
  return start < count ? start : count;
}

// A rank's inline mailbox area during broadcast_registered's agreement.
struct RegisteredOffer {
  transport::RemoteRegion region;
  uint64_t registered;  // the buffer (root: input, receiver: output) lies in registered memory
  uint64_t status;      // receiver: 1 if it mapped the root's buffer; root: the receivers it
                        // writes a share of (bit r for rank r)
};
static_assert(sizeof(RegisteredOffer) <= transport::SharedWindow::kInlineBytes);

// The part of a helped receiver's output the root writes: [0, share).
size_t root_share(size_t bytes, int nranks) { return bytes / nranks / 64 * 64; }

}  // namespace

void DirectCollectives::await(int rank, unsigned parity, uint64_t value, Deadline deadline,
                              const OpLabel& what) {
  if (window_->flag(rank, parity) >= value) return;
  // No flush while spinning: a rank publishes before it awaits the others at the same step, so
  // the rank we wait for has not reached that step and cannot sleep on our newest flag; older
  // flags were flushed when their operation ended. The flush's fence would only stall the first
  // poll until our own flag store completes. Before yielding or sleeping we flush anyway.
  // The wait's clock starts at its first look (poll 16): most waits end before it, and reading
  // the clock costs as much as a poll (clock_gettime took 10% of an 8-byte allreduce's samples).
  Clock::time_point start{};
  for (unsigned polls = 1;; ++polls) {
    if (window_->flag(rank, parity) >= value) return;
    // While spinning, look at the clock one poll in 16.
    if (polls % 16 != 0) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    const Clock::time_point now = Clock::now();
    if (start == Clock::time_point{}) start = now;
    throw_if_stopped(abort_, deadline, now, what,
                     [&](std::vector<int>& pending) { pending.push_back(rank); });
    const WaitPolicy::Phase phase = policy_.phase(now - start);
    if (phase == WaitPolicy::Phase::Spin) continue;
    window_->flush();
    if (phase == WaitPolicy::Phase::Yield) {
      sched_yield();
    } else {
      if (what.observer != nullptr) what.observer->waiting_for(std::span<const int>(&rank, 1));
      window_->wait_for(rank, parity, value, deadline.remaining(std::chrono::milliseconds(50)));
    }
    polls = 15;  // past the spin phase every poll yields or sleeps: look at the clock each time
  }
}

void DirectCollectives::await_all(unsigned parity, uint64_t value, Deadline deadline,
                                  const OpLabel& what) {
  for (int r = 0; r < window_->nranks(); ++r) {
    if (r != window_->rank()) await(r, parity, value, deadline, what);
  }
}

unsigned DirectCollectives::begin(Deadline deadline, const OpLabel& what) {
  ++sequence_;
  if (sequence_ > 1) await_all((sequence_ - 1) & 1, mark(sequence_ - 1, 0), deadline, what);
  return sequence_ & 1;
}

void DirectCollectives::reduce_range(std::byte* dst, size_t offset, size_t count, unsigned parity,
                                     size_t bytes, const std::byte* own, const ExecOp& op) {
  // dst = c0 op c1 op ... in rank order: the peers' contributions from their mailboxes, ours
  // from `own` (already offset).
  const size_t at = offset * op.elem_size;
  const int me = window_->rank();
  const int n = window_->nranks();
  auto source = [&](int r) -> const std::byte* {
    return r == me ? own : window_->mailbox(r, parity, bytes) + at;
  };
  op.reduce(dst, source(0), source(1), count);
  for (int r = 2; r < n; ++r) op.reduce(dst, dst, source(r), count);
}

const std::byte* DirectCollectives::own_contribution(const std::byte* in, const std::byte* out,
                                                     const std::byte* mine) const {
  // Our contribution is read from the input where we can: the mailbox copy's cache line may still
  // be on its way to the peers (reading it back stalls until our stores have left), while the
  // input is ours alone. In place, with ranks 0 and 1 ahead of us in the order, the output
  // overwrites the input before our turn: then from the copy.
  return in == out && window_->rank() >= 2 ? mine : in;
}

void DirectCollectives::all_reduce(const void* input, void* output, size_t count, const ExecOp& op,
                                   Deadline deadline, const OpLabel& what, bool one_shot) {
  const size_t es = op.elem_size;
  const size_t bytes = count * es;
  const unsigned p = begin(deadline, what);
  const uint64_t s = sequence_;
  const int me = window_->rank();
  const int n = window_->nranks();
  const auto* in = static_cast<const std::byte*>(input);
  auto* out = static_cast<std::byte*>(output);
  std::byte* mine = window_->mailbox(me, p, bytes);

  if (one_shot || bytes <= transport::SharedWindow::kInlineBytes || n == 1) {
    kernels_->copy(mine, in, bytes);
    window_->publish(p, mark(s, 0));
    await_all(p, mark(s, 0), deadline, what);
    if (n == 1) {
      kernels_->copy(out, mine, bytes);
    } else {
      reduce_range(out, 0, count, p, bytes, own_contribution(in, out, mine), op);
    }
    if (op.divide != nullptr) op.divide(out, count, op.divisor);
    window_->flush();
    return;
  }

  // Two-shot. The others read only their own chunks of our mailbox: copy just those.
  const size_t lo = chunk_start(count, es, n, me);
  const size_t hi = chunk_start(count, es, n, me + 1);
  kernels_->copy(mine, in, lo * es);
  kernels_->copy(mine + hi * es, in + hi * es, (count - hi) * es);
  if (in == out && me >= 2) kernels_->copy(mine + lo * es, in + lo * es, (hi - lo) * es);
  const std::byte* own = own_contribution(in, out, mine) + lo * es;
  window_->publish(p, mark(s, 0));
  await_all(p, mark(s, 0), deadline, what);

  // Reduce our chunk, put the result where the others read it, gather theirs.
  if (hi > lo) {
    reduce_range(out + lo * es, lo, hi - lo, p, bytes, own, op);
    if (op.divide != nullptr) op.divide(out + lo * es, hi - lo, op.divisor);
    kernels_->copy(mine + lo * es, out + lo * es, (hi - lo) * es);
  }
  window_->publish(p, mark(s, 1));
  for (int i = 1; i < n; ++i) {
    const int r = (me + i) % n;  // start at different ranks: spread the readers
    const size_t rlo = chunk_start(count, es, n, r);
    const size_t rhi = chunk_start(count, es, n, r + 1);
    await(r, p, mark(s, 1), deadline, what);
    if (rhi > rlo) {
      kernels_->copy(out + rlo * es, window_->mailbox(r, p, bytes) + rlo * es, (rhi - rlo) * es);
    }
  }
  window_->flush();
}

void DirectCollectives::broadcast(const void* input, void* output, size_t bytes, int root,
                                  Deadline deadline, const OpLabel& what) {
  // Every rank asks at the same call (the sizes agree), before the operation starts.
  const bool cma = bytes >= kCmaBroadcastMin && window_->nranks() > 1 && cma_usable(deadline, what);
  const unsigned p = begin(deadline, what);
  const uint64_t s = sequence_;
  std::byte* box = window_->mailbox(root, p, bytes);
  // With cross-memory attach (direct_cma.cc): where the root's input is, and how much of it comes
  // through the mailbox; the receivers read the rest from the root's process. In the inline area,
  // free for a message this large, published with the first piece.
  struct Split {
    uint64_t input;
    uint64_t head;
  };
  std::byte* split_line = window_->mailbox(root, p, sizeof(Split));
  if (window_->rank() == root) {
    const size_t tail = cma && output != input ? cma_share(bytes) : 0;
    if (cma) {
      const Split split{reinterpret_cast<uintptr_t>(input), bytes - tail};
      kernels_->copy(split_line, &split, sizeof(split));
    }
    // Receivers may sleep: one fence per piece is nothing next to its copy.
    put_pieces(box, static_cast<const std::byte*>(input), bytes - tail, p, 0, /*flush_each=*/true);
    if (output != input) kernels_->copy(output, input, bytes);
    // They read our input until they say they are done.
    if (tail > 0) await_all(p, mark(s, 0), deadline, what);
    return;
  }
  auto* out = static_cast<std::byte*>(output);
  size_t head = bytes;
  if (cma) {
    await(root, p, mark(s, 1), deadline, what);  // the first piece, and the split with it
    Split split;
    kernels_->copy(&split, split_line, sizeof(split));
    head = split.head;
    if (head > bytes) {
      throw_error(cclInternalError, "%s: rank %d's broadcast split %llu exceeds %zu bytes",
                  what.str().c_str(), root, static_cast<unsigned long long>(head), bytes);
    }
    const auto* from = reinterpret_cast<const std::byte*>(split.input) + head;
    if (head < bytes && !window_->read_remote(root, from, out + head, bytes - head)) {
      // The probe found that this rank may read the root's memory, so a failure now means the
      // root is gone (it timed out and left, or died) or no longer maps its input: the root's
      // failure, not this rank's system.
      const int error = errno;
      throw_error(cclRemoteError,
                  "%s: reading %zu bytes of rank %d's input failed (process_vm_readv: %s): "
                  "rank %d left or no longer holds its input",
                  what.str().c_str(), bytes - head, root, std::strerror(error), root);
    }
  }
  get_pieces(out, root, box, head, p, 0, deadline, what);
  window_->publish(p, mark(s, 0));  // done reading: the root may reuse the mailbox (and input)
  window_->flush();
}

size_t DirectCollectives::pieces_of(size_t bytes) {
  return (bytes + kBroadcastPiece - 1) / kBroadcastPiece;
}

void DirectCollectives::put_pieces(std::byte* box, const std::byte* src, size_t bytes,
                                   unsigned parity, uint64_t first_step, bool flush_each) {
  for (size_t k = 0, at = 0; at < bytes; ++k, at += kBroadcastPiece) {
    kernels_->copy(box + at, src + at, std::min(kBroadcastPiece, bytes - at));
    window_->publish(parity, mark(sequence_, first_step + k + 1));
    if (flush_each) window_->flush();
  }
}

void DirectCollectives::get_pieces(std::byte* dst, int rank, const std::byte* box, size_t bytes,
                                   unsigned parity, uint64_t first_step, Deadline deadline,
                                   const OpLabel& what) {
  for (size_t k = 0, at = 0; at < bytes; ++k, at += kBroadcastPiece) {
    await(rank, parity, mark(sequence_, first_step + k + 1), deadline, what);
    kernels_->copy(dst + at, box + at, std::min(kBroadcastPiece, bytes - at));
  }
}

void DirectCollectives::all_gather(const void* input, void* output, size_t bytes, Deadline deadline,
                                   const OpLabel& what) {
  const unsigned p = begin(deadline, what);
  const int me = window_->rank();
  const int n = window_->nranks();
  const auto* in = static_cast<const std::byte*>(input);
  auto* out = static_cast<std::byte*>(output);
  put_pieces(window_->mailbox(me, p, bytes), in, bytes, p, 0, false);
  window_->flush();  // a peer may be asleep waiting for our pieces
  // Our own block meanwhile: the peers are still publishing theirs.
  std::byte* own = out + static_cast<size_t>(me) * bytes;
  if (own != in) kernels_->copy(own, in, bytes);
  for (int i = 1; i < n; ++i) {
    const int r = (me + i) % n;  // start at different ranks: spread the readers
    get_pieces(out + static_cast<size_t>(r) * bytes, r, window_->mailbox(r, p, bytes), bytes, p, 0,
               deadline, what);
  }
  window_->flush();
}

void DirectCollectives::all_to_all(const void* input, void* output, size_t bytes, Deadline deadline,
                                   const OpLabel& what) {
  const unsigned p = begin(deadline, what);
  const int me = window_->rank();
  const int n = window_->nranks();
  const auto* in = static_cast<const std::byte*>(input);
  auto* out = static_cast<std::byte*>(output);
  const size_t total = bytes * static_cast<size_t>(n);
  // The i-th block a rank publishes (i = 1 .. n-1) is the one for rank (rank + i) % n; its pieces
  // are flagged after the (i - 1) * pieces_of(bytes) pieces before it, so every flag value names
  // one piece.
  std::byte* mine = window_->mailbox(me, p, total);
  for (int i = 1; i < n; ++i) {
    const size_t block = static_cast<size_t>((me + i) % n) * bytes;
    put_pieces(mine + block, in + block, bytes, p, (i - 1) * pieces_of(bytes), false);
  }
  window_->flush();  // a peer may be asleep waiting for our pieces
  const size_t own = static_cast<size_t>(me) * bytes;
  if (in != out) kernels_->copy(out + own, in + own, bytes);
  for (int j = 1; j < n; ++j) {
    const int r = (me - j + n) % n;  // the rank whose j-th block is ours: first published first
    get_pieces(out + static_cast<size_t>(r) * bytes, r, window_->mailbox(r, p, total) + own, bytes,
               p, (j - 1) * pieces_of(bytes), deadline, what);
  }
  window_->flush();
}

bool DirectCollectives::broadcast_registered(const void* input, void* output, size_t bytes,
                                             int root, Deadline deadline, const OpLabel& what,
                                             const transport::RegisteredRegion* region) {
  const unsigned p = begin(deadline, what);
  const uint64_t s = sequence_;
  const int me = window_->rank();
  const int n = window_->nranks();
  const bool is_root = me == root;
  auto offer_of = [&](int r) {
    RegisteredOffer o;
    kernels_->copy(&o, window_->mailbox(r, p, sizeof(RegisteredOffer)), sizeof(o));
    return o;
  };
  auto* mine = window_->mailbox(me, p, sizeof(RegisteredOffer));

  // 1. Who is registered.
  RegisteredOffer offer{};
  offer.registered =
      window_->describe(region, is_root ? input : output, bytes, &offer.region) ? 1 : 0;
  kernels_->copy(mine, &offer, sizeof(offer));
  window_->publish(p, mark(s, 0));
  await_all(p, mark(s, 0), deadline, what);
  const RegisteredOffer from_root = offer_of(root);
  if (from_root.registered == 0) {
    window_->flush();
    return false;
  }

  // 2. Who could map what. An in-place root helps the receivers it can reach (up to 64).
  const std::byte* source = nullptr;
  std::byte* helped[64] = {};
  uint64_t status = 0;
  if (!is_root) {
    source = window_->map_region(root, from_root.region, bytes);
    status = source != nullptr ? 1 : 0;
  } else if (input == output && n <= 64) {
    for (int r = 0; r < n; ++r) {
      const RegisteredOffer o = r == root ? RegisteredOffer{} : offer_of(r);
      if (o.registered == 0) continue;
      helped[r] = window_->map_region(r, o.region, bytes);
      if (helped[r] != nullptr) status |= uint64_t{1} << r;
    }
  }
  kernels_->copy(mine + offsetof(RegisteredOffer, status), &status, sizeof(status));
  window_->publish(p, mark(s, 1));
  await_all(p, mark(s, 1), deadline, what);
  for (int r = 0; r < n; ++r) {
    if (r != root && offer_of(r).status == 0) {
      window_->flush();
      return false;  // some receiver cannot read the root's buffer: everyone falls back
    }
  }
  const uint64_t root_helps = offer_of(root).status;
  const size_t share = root_share(bytes, n);

  // 3. The copies, then: receivers tell the root they are done with its input, the root tells
  //    the receivers it helped that their output is complete.
  if (is_root) {
    for (int r = 0; r < n; ++r) {
      if (root_helps & (uint64_t{1} << r)) kernels_->copy(helped[r], input, share);
    }
    if (output != input) kernels_->copy(output, input, bytes);
  } else {
    const size_t from = (root_helps & (uint64_t{1} << me)) ? share : 0;
    kernels_->copy(static_cast<std::byte*>(output) + from, source + from, bytes - from);
  }
  window_->publish(p, mark(s, 2));
  if (is_root) {
    await_all(p, mark(s, 2), deadline, what);
  } else if (root_helps & (uint64_t{1} << me)) {
    await(root, p, mark(s, 2), deadline, what);
  }
  window_->flush();
  return true;
}

void DirectCollectives::barrier(Deadline deadline, const OpLabel& what) {
  const unsigned p = begin(deadline, what);
  window_->publish(p, mark(sequence_, 0));
  await_all(p, mark(sequence_, 0), deadline, what);
  window_->flush();
}

}  // namespace ccl::algo
