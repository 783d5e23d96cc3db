#include "transport/shm/shm_window.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "transport/registered_region.h"
#include "transport/shm/doorbell.h"

namespace ccl::transport::shm {

ShmWindow::ShmWindow(int rank, std::vector<WindowView> views, size_t capacity,
                     std::atomic<bool>* interrupt_pending,
                     std::chrono::milliseconds liveness_interval, const PeerFailures* peer_failures,
                     bool cma)
    : rank_(rank),
      views_(std::move(views)),
      capacity_(capacity),
      interrupt_pending_(interrupt_pending),
      liveness_interval_(liveness_interval),
      cma_(cma),
      peer_failures_(peer_failures) {}

bool ShmWindow::read_remote(int rank, const void* remote, void* local, size_t bytes) {
  if (!cma_ || rank < 0 || rank >= nranks()) return false;
  // One call moves at most what the kernel takes at once (it may stop early): loop on the rest.
  size_t done = 0;
  while (done < bytes) {
    iovec to{static_cast<std::byte*>(local) + done, bytes - done};
    iovec from{const_cast<std::byte*>(static_cast<const std::byte*>(remote)) + done, bytes - done};
    const ssize_t n = process_vm_readv(views_[rank].pid, &to, 1, &from, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;  // EPERM (ptrace rules, Yama), ESRCH (gone), EFAULT, ENOSYS
    }
    done += static_cast<size_t>(n);
  }
  // What was read is that rank's buffer only while the rank still runs this operation: one that
  // gave up (its failure notice comes before its caller sees the error) or left may have reused
  // or unmapped the memory, so a read that overlapped that is not trusted.
  if (peer_failures_ != nullptr) {
    peer_failures_->throw_if_any([rank](int peer) { return peer == rank; });
    if (peer_failures_->departed(rank)) PeerFailures::throw_departed(rank);
  }
  return true;
}

std::byte* ShmWindow::mailbox(int rank, unsigned parity, size_t bytes) {
  if (bytes > capacity_ && bytes > kInlineBytes) {
    throw_error(cclInternalError, "shm window: %zu bytes do not fit a mailbox of %zu", bytes,
                capacity_);
  }
  if (bytes <= kInlineBytes) return line(rank, parity)->inline_data;
  return views_[rank].base + SegmentGeometry::kWindowBulkOffset +
         (parity & 1) * views_[rank].bulk_stride;
}

bool ShmWindow::describe(const RegisteredRegion* region, const void* ptr, size_t bytes,
                         RemoteRegion* out) {
  if (region == nullptr || !region->covers(ptr, bytes)) return false;
  const TransportKey* key = region->key_of(kShmKeyName);
  if (key == nullptr || key->packed_bytes != sizeof(RemoteRegion)) return false;
  RemoteRegion whole;
  std::memcpy(&whole, key->packed.data(), sizeof(whole));
  return registered_within(whole, region->offset_of(ptr), bytes, out);
}

void ShmWindow::ring_peers() {
  // The flag stores were W1 of doorbell.h; the fence orders them before the waiters loads (W2)
  // as the seq_cst store does for the rings. (ThreadSanitizer does not model fences: the TSan
  // build silences GCC's warning about it; the data itself is ordered by release/acquire.)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  unflushed_ = false;
  for (int r = 0; r < nranks(); ++r) {
    if (r != rank_) doorbell_ring(views_[r].bell);
  }
}

void ShmWindow::wait_for(int rank, unsigned parity, uint64_t value,
                         std::chrono::microseconds timeout) {
  flush();
  const auto awaited = [rank](int peer) { return peer == rank; };
  const bool slept = doorbell_sleep(
      views_[rank_].bell, *interrupt_pending_,
      [&] { return flag(rank, parity) >= value || peer_failures_->any(awaited); },
      std::min(timeout, liveness_interval_));
  if (flag(rank, parity) >= value) return;
  peer_failures_->throw_if_any(awaited);
  // Only the awaited rank matters: another may have finished this operation and exited. The
  // flag is read again after the state: what the peer stored before it left is visible then.
  const PeerLiveness* liveness = views_[rank].liveness;
  if (slept && liveness != nullptr && liveness->exited() && flag(rank, parity) < value) {
    liveness->throw_exited(rank);
  }
  if (peer_failures_->departed(rank) && flag(rank, parity) < value) {
    PeerFailures::throw_departed(rank);
  }
}

}  // namespace ccl::transport::shm
