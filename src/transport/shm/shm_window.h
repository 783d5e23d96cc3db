// The shared window (transport/shared_window.h) over shm segments: each rank's mailboxes live in
// its own segment (shm_layout.h), which every peer has mapped anyway for the doorbell. Sleeping
// and waking use the segments' doorbells with the protocol of doorbell.h, so a publish that
// races with a sleeper is never lost, and interrupt() of the transport wakes window sleepers too.
#pragma once

#include <atomic>
#include <chrono>
#include <vector>

#include "transport/shared_window.h"
#include "transport/shm/peer_failures.h"
#include "transport/shm/peer_liveness.h"
#include "transport/shm/registered_memory.h"
#include "transport/shm/shm_layout.h"

namespace ccl::transport::shm {

// Where one rank's window lies in this process's mapping of that rank's segment.
struct WindowView {
  std::byte* base = nullptr;               // the first MailboxLine
  size_t bulk_stride = 0;                  // bytes from bulk area 0 to bulk area 1
  Doorbell* bell = nullptr;                // that rank's doorbell
  const PeerLiveness* liveness = nullptr;  // nullptr for ourselves
  int pid = 0;                             // the process of that rank
};

class ShmWindow final : public SharedWindow {
 public:
  // views[r] for every rank r of the communicator; views[rank] is ours. `interrupt_pending` is the
  // transport's flag, set by interrupt() before it rings our doorbell.
  // A sleep lasts at most `liveness_interval`, so a dead awaited rank is noticed (the
  // transport's ShmOptions::liveness_interval). A failure notice posted by any peer
  // (`peer_failures`, the transport's) ends a wait with that notice's error; an abort notice,
  // or a goodbye, only a wait for that peer's flag.
  ShmWindow(int rank, std::vector<WindowView> views, size_t capacity,
            std::atomic<bool>* interrupt_pending, std::chrono::milliseconds liveness_interval,
            const PeerFailures* peer_failures, bool cma = true);

  int nranks() const override { return static_cast<int>(views_.size()); }
  int rank() const override { return rank_; }
  size_t capacity() const override { return capacity_; }
  std::byte* mailbox(int rank, unsigned parity, size_t bytes) override;
  void publish(unsigned parity, uint64_t value) override {
    line(rank_, parity)->flag.store(value, std::memory_order_release);
    unflushed_ = true;
  }
  void flush() override {
    if (unflushed_) ring_peers();
  }
  uint64_t flag(int rank, unsigned parity) const override {
    // seq_cst: in wait_for() this load is S3 of doorbell.h.
    return line(rank, parity)->flag.load(std::memory_order_seq_cst);
  }
  void wait_for(int rank, unsigned parity, uint64_t value,
                std::chrono::microseconds timeout) override;
  bool describe(const RegisteredRegion* region, const void* ptr, size_t bytes,
                RemoteRegion* out) override;
  bool read_remote(int rank, const void* remote, void* local, size_t bytes) override;
  std::byte* map_region(int rank, const RemoteRegion& region, size_t bytes) override {
    return mapper_.map(views_[rank].pid, region, bytes);
  }

 private:
  MailboxLine* line(int rank, unsigned parity) const {
    return reinterpret_cast<MailboxLine*>(views_[rank].base) + (parity & 1);
  }

  void ring_peers();

  int rank_;
  bool unflushed_ = false;
  std::vector<WindowView> views_;
  size_t capacity_;
  std::atomic<bool>* interrupt_pending_;
  std::chrono::microseconds liveness_interval_;
  bool cma_;  // read_remote may use process_vm_readv (CCL_SHM_CMA)
  const PeerFailures* peer_failures_;
  RegisteredMapper mapper_;
};

}  // namespace ccl::transport::shm
