// Cross-memory attach for the direct broadcast (direct.h): an out-of-place root has two copies to
// make (its mailbox, its own output) where each receiver has one, so the root is the bottleneck.
// Each receiver reads a share of the root's input straight from the root's process instead
// (SharedWindow::read_remote: process_vm_readv), and the root leaves that share out of its
// mailbox. The kernel's copy is slower than memcpy (measured here at 1 MiB: 7.6 against 22 GB/s,
// it pins each page), so the share balances the two sides: root head + bytes at memcpy speed,
// receiver head at memcpy speed + tail at CMA speed, equal when tail is 7.6 / 22 of the bytes,
// about a third.
//
// Whether every rank may read every other's memory (same user, ptrace rules, Yama's
// ptrace_scope, CCL_SHM_CMA) is found once per communicator by a probe, an operation of its own
// that every rank runs at the same call (the first broadcast that could use it): each rank puts
// a magic word in its inline mailbox with the word's address, every rank reads every peer's word
// through read_remote, and they share the verdicts, so all agree.
#include <cstddef>

#include "algorithms/direct.h"
#include "base/log.h"

namespace ccl::algo {

namespace {

struct Probe {
  uint64_t magic;    // what a reader must find at `address`
  uint64_t address;  // of `magic`, in the owner's process
  uint64_t ok;       // 1: the owner read every peer's magic
};
static_assert(sizeof(Probe) <= transport::SharedWindow::kInlineBytes);

constexpr uint64_t kProbeMagic = 0x63636c2d636d6121ULL;  // "ccl-cma!"

}  // namespace

size_t DirectCollectives::cma_share(size_t bytes) { return bytes / 3 / 64 * 64; }

bool DirectCollectives::cma_usable(Deadline deadline, const OpLabel& what) {
  if (cma_ != 0) return cma_ > 0;
  const unsigned p = begin(deadline, what);
  const uint64_t s = sequence_;
  const int me = window_->rank();
  const int n = window_->nranks();
  std::byte* mine = window_->mailbox(me, p, sizeof(Probe));
  const Probe probe{kProbeMagic ^ s, reinterpret_cast<uintptr_t>(mine), 0};
  kernels_->copy(mine, &probe, sizeof(probe));
  window_->publish(p, mark(s, 0));
  window_->flush();
  await_all(p, mark(s, 0), deadline, what);

  uint64_t ok = 1;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    Probe theirs;
    kernels_->copy(&theirs, window_->mailbox(r, p, sizeof(Probe)), sizeof(theirs));
    uint64_t got = 0;
    if (!window_->read_remote(r, reinterpret_cast<const void*>(theirs.address), &got,
                              sizeof(got)) ||
        got != theirs.magic) {
      ok = 0;
    }
  }
  kernels_->copy(mine + offsetof(Probe, ok), &ok, sizeof(ok));
  window_->publish(p, mark(s, 1));
  window_->flush();
  await_all(p, mark(s, 1), deadline, what);
  bool all = true;
  for (int r = 0; r < n; ++r) {
    Probe theirs;
    kernels_->copy(&theirs, window_->mailbox(r, p, sizeof(Probe)), sizeof(theirs));
    all = all && theirs.ok == 1;
  }
  window_->flush();
  cma_ = all ? 1 : -1;
  CCL_INFO(kColl,
           "rank %d: broadcast receivers %s the root's memory directly (cross-memory "
           "attach)",
           me, all ? "read part of" : "cannot read");
  return all;
}

}  // namespace ccl::algo
