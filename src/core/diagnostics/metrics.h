// A communicator's operation metrics (CCL_METRICS_FILE; docs/metrics.md): counters by collective
// and size bucket (operations, bytes, errors, timeouts, peer failures) and a histogram of
// operation time by collective, as Prometheus text. This file is the pure part: the buckets, the
// counters one rank's op runner bumps, and the text of a set of communicators' snapshots.
// metrics_export.h writes them to the file.
//
// What is counted: every operation the op runner begins (core/comm/op_runner.h begin_op), once,
// when it ends: successful or not. Its bytes are the size nccl-tests and the trace report for the
// call: count x the datatype's size, times nranks for allgather (the output), reducescatter (the
// input) and alltoall; a send/recv group's is the sum of its sends and receives. Argument errors
// that the C API rejects before the call reaches the communicator are not counted (the call never
// ran), nor are calls on a communicator that failed, was aborted or finalized before them.
//
// Cost: each counter is a relaxed atomic with one writer (the op mutex's holder); an operation
// adds 4 of them (5 to 7 when it fails); its time comes from the op runner's own clock readings.
// The exporter thread reads them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/diagnostics/op_check.h"

namespace ccl::metrics {

inline constexpr size_t kKinds = static_cast<size_t>(OpKind::SendRecv) + 1;

// Size buckets, powers of 16 bytes: le_256B, le_4KiB, le_64KiB, le_1MiB, le_16MiB, le_256MiB,
// gt_256MiB (each "at most", the last "more than").
inline constexpr size_t kSizeBuckets = 7;
size_t size_bucket(uint64_t bytes);
const char* size_bucket_label(size_t bucket);

// The histogram's upper bounds (seconds): 1 and 3 times each power of ten from 100 ns to 100 s
// (19; a small operation on shared memory takes under a microsecond), and +Inf.
inline constexpr size_t kTimeBounds = 19;
inline constexpr size_t kTimeBuckets = kTimeBounds + 1;  // the last: +Inf
extern const std::array<uint64_t, kTimeBounds> kTimeBoundsNs;
size_t time_bucket(uint64_t ns);  // the first bucket whose bound is >= ns

// How an operation ended. Every outcome but Completed is an error; TimedOut (cclTimeout) and
// PeerFailed (cclRemoteError: a peer failed, closed its connection or told of its failure; not
// after this rank's own abort or a revoke) are counted on their own too.
enum class Outcome { Completed, Failed, TimedOut, PeerFailed };

// What the file shows of one communicator on this rank.
struct Snapshot {
  std::string comm;  // its label: trace_path.h's communicator_tag, "<name>-<tag>"
  int rank = 0;
  int nranks = 0;
  struct Cell {
    uint64_t ops = 0, bytes = 0, errors = 0, timeouts = 0, peer_failures = 0;
  };
  std::array<std::array<Cell, kSizeBuckets>, kKinds> cells{};
  std::array<std::array<uint64_t, kTimeBuckets>, kKinds> time_buckets{};  // not cumulative
  std::array<uint64_t, kKinds> time_sum_ns{};
};

class CommMetrics {
 public:
  CommMetrics() = default;
  CommMetrics(const CommMetrics&) = delete;
  CommMetrics& operator=(const CommMetrics&) = delete;

  // An operation of `kind` and `bytes` ended after `ns` nanoseconds. One thread at a time.
  void record(OpKind kind, uint64_t bytes, uint64_t ns, Outcome outcome);
  // The counters now into `out` (its identity fields untouched). Any thread.
  void snapshot_into(Snapshot& out) const;

 private:
  struct Cell {
    std::atomic<uint64_t> ops{0}, bytes{0}, errors{0}, timeouts{0}, peer_failures{0};
  };
  Cell cells_[kKinds][kSizeBuckets];
  std::atomic<uint64_t> time_buckets_[kKinds][kTimeBuckets] = {};
  std::atomic<uint64_t> time_sum_ns_[kKinds] = {};
};

// The Prometheus text of `comms`, family by family: ccl_communicator_ranks for every one;
// the counters for each (collective, size) that has run an operation; the histogram for each
// collective that has. Every series is labelled comm and rank.
std::string render(std::span<const Snapshot> comms);

}  // namespace ccl::metrics
