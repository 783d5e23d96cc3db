// Sleeping and waking across processes on a Doorbell (shm_layout.h) with shared futexes.
//
// The protocol, and why no wake-up is lost (a Dekker-style handshake). Every step is a seq_cst
// atomic operation (no separate fences: GCC's ThreadSanitizer does not support them), so all of
// them are in one total order S that agrees with each thread's program order.
//   waker:   W1 publish: head (or tail) counter store, seq_cst
//            W2 if waiters (load) != 0:   W3 sequence += 1, FUTEX_WAKE(sequence)
//   sleeper (Transport::wait):
//            S1 s = sequence (load)   S2 waiters += 1
//            S3 re-read the counters; if no connection can progress: FUTEX_WAIT(sequence, s)
//            S4 waiters -= 1
// If W2 precedes S2 in S, then W1 < W2 < S2 < S3, so the loads of S3 return W1's value (or a
// later one): the sleeper sees the progress and does not sleep. Otherwise S2 precedes W2, so W2
// returns at least 1 (S4 has not happened: the sleeper is still in S3) and the waker performs
// W3. S1 precedes S2 < W2 < W3 in S, so S1 read a value older than W3's: by the time of W3,
// sequence != s, and FUTEX_WAIT either fails at once (the kernel compares the word atomically
// with queueing the sleeper) or is woken by the FUTEX_WAKE that follows. The sleeper cannot
// sleep through the update. (On x86 the seq_cst store is an xchg, the loads plain moves.)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "transport/shm/shm_layout.h"

namespace ccl::transport::shm {

// W2..W3: wakes the doorbell's sleepers, if there are any; call it right after a seq_cst store
// that published progress (W1). Costs one load when nobody sleeps.
void doorbell_force(Doorbell* bell);
inline void doorbell_ring(Doorbell* bell) {
  if (bell->waiters.load(std::memory_order_seq_cst) != 0) doorbell_force(bell);
}

// doorbell_force: W3 unconditionally (also for interrupt(), whose sleeper may not have
// registered yet; see ShmTransport::wait()).

// S1..S4 for a sleeper: sleeps on `bell` at most `timeout` unless `interrupt` is pending or
// `ready()` (S3: it must read the published state with seq_cst loads) says there is progress.
// Consumes a pending interrupt. Returns whether it went to sleep.
template <typename Ready>
bool doorbell_sleep(Doorbell* bell, std::atomic<bool>& interrupt, Ready&& ready,
                    std::chrono::microseconds timeout);

// FUTEX_WAIT on the (shared, not process-private) word while it equals `expected`, at most
// `timeout`. Returns on wake, on timeout, on a changed word or a signal; the caller re-checks.
void futex_wait_shared(std::atomic<uint32_t>* word, uint32_t expected,
                       std::chrono::microseconds timeout);

template <typename Ready>
bool doorbell_sleep(Doorbell* bell, std::atomic<bool>& interrupt, Ready&& ready,
                    std::chrono::microseconds timeout) {
  if (interrupt.exchange(false)) return false;
  const uint32_t sequence = bell->sequence.load(std::memory_order_seq_cst);  // S1
  bell->waiters.fetch_add(1, std::memory_order_seq_cst);                     // S2
  bool slept = false;
  if (!interrupt.load(std::memory_order_seq_cst) && !ready()) {  // S3
    futex_wait_shared(&bell->sequence, sequence, timeout);
    slept = true;
  }
  bell->waiters.fetch_sub(1, std::memory_order_seq_cst);  // S4
  interrupt.store(false, std::memory_order_relaxed);
  return slept;
}

}  // namespace ccl::transport::shm
