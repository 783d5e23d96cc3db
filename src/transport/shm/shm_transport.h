// The shared-memory transport between ranks of one host (DESIGN.md: transport/shm).
//
// Each rank owns one segment, /dev/shm/ccl-<comm_tag>-<rank>, holding its doorbell and one
// inbound ring per peer (shm_layout.h). connect() creates it, publishes it through the store,
// maps the peers' segments, waits until every peer has mapped its own, and unlinks it: from then
// on nothing of this communicator is visible in /dev/shm, whatever happens to the processes.
// A send copies the user buffer into the peer's ring; a receive hands the ring's slots straight
// to the sink. wait() sleeps on a futex in the own segment and notices dead peers (pidfd) within
// one wait slice (ShmOptions::liveness_interval).
//
// connect() is called once per transport (one transport per communicator); a second call with
// peers throws InvalidUsage.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "transport/transport.h"

namespace ccl::transport {

struct ShmOptions {
  size_t slots = 8;                // K slots per ring (CCL_SHM_SLOTS)
  size_t slot_bytes = 512 * 1024;  // S bytes per slot, a multiple of kPieceAlign
  // Bulk bytes of each shared-window mailbox (CCL_SHM_WINDOW); 0: no window. A window exists
  // only when one connect() joins every rank of the communicator.
  size_t window_bytes = 1 << 20;
  // Bytes a rank's segment may take for its inbound rings and its window (CCL_SHM_POOL; 0: no
  // limit). Every local peer has a ring in it: with many of them, each ring gets an even share of
  // the pool (never more than K x S), so shared memory grows linearly with the ranks of a host
  // instead of as n(n-1) x CCL_BUFFSIZE (16 ranks: 1,009 MiB before, about 31 MiB per rank now).
  size_t pool_bytes = 32 << 20;
  // Whether the window may read peers' memory through cross-memory attach (CCL_SHM_CMA).
  bool cma = true;
  // Longest single sleep in wait() before peers are checked for liveness.
  std::chrono::milliseconds liveness_interval{50};
};

// K = CCL_SHM_SLOTS, S = CCL_BUFFSIZE / K rounded down to a multiple of kPieceAlign.
// Throws InvalidUsage for values that make no ring (K < 1, S < kPieceAlign).
ShmOptions shm_options_from_config();

// The slot size of a segment with `channels` inbound rings and a window of `window_bytes`: S,
// or less so that the segment fits options.pool_bytes, but never under kPieceAlign (then the
// segment is larger than the pool). Pure, for tests.
size_t pooled_slot_bytes(const ShmOptions& options, size_t channels, size_t window_bytes);

// Removes the shared-memory segment of each of `ranks` (of communicator `comm_tag`) whose process
// (pids[i]; <= 0: unknown, skipped) has exited: a rank that died while the communicator was being
// set up cannot remove its own.
void remove_segments_of_exited(const std::string& comm_tag, std::span<const int> ranks,
                               std::span<const int> pids);

// One per communicator; the options come from the config registry.
std::unique_ptr<Transport> make_shm_transport(const SetupContext& ctx);
// Explicit options (tests, benchmarks). Validated like the config values.
std::unique_ptr<Transport> make_shm_transport(const SetupContext& ctx, const ShmOptions& options);

}  // namespace ccl::transport
