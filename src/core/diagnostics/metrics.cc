#include "core/diagnostics/metrics.h"

#include <algorithm>
#include <bit>

#include "core/diagnostics/metrics_text.h"

namespace ccl::metrics {

namespace {

constexpr uint64_t kSmallest = 256;  // the first bucket's bound; each next is 16 times
constexpr std::array<const char*, kSizeBuckets> kSizeLabels = {
    "le_256B", "le_4KiB", "le_64KiB", "le_1MiB", "le_16MiB", "le_256MiB", "gt_256MiB"};
// The bounds as the le label gives them (seconds), in the order of kTimeBoundsNs.
constexpr std::array<const char*, kTimeBounds> kTimeLabels = {
    "1e-07", "3e-07", "1e-06", "3e-06", "1e-05", "3e-05", "0.0001", "0.0003", "0.001", "0.003",
    "0.01",  "0.03",  "0.1",   "0.3",   "1",     "3",     "10",     "30",     "100"};

constexpr auto kRelaxed = std::memory_order_relaxed;

// One writer: a load and a store, not a locked read-modify-write.
void add(std::atomic<uint64_t>& counter, uint64_t value) {
  counter.store(counter.load(kRelaxed) + value, kRelaxed);
}

// 100, 300, 1000, 3000, ... 100'000'000'000 ns.
constexpr std::array<uint64_t, kTimeBounds> time_bounds() {
  std::array<uint64_t, kTimeBounds> bounds{};
  uint64_t decade = 100;
  for (size_t i = 0; i < kTimeBounds; ++i) {
    bounds[i] = i % 2 == 0 ? decade : 3 * decade;
    if (i % 2 == 1) decade *= 10;
  }
  return bounds;
}

}  // namespace

const std::array<uint64_t, kTimeBounds> kTimeBoundsNs = time_bounds();

size_t size_bucket(uint64_t bytes) {
  // (16^(k+1), 16^(k+2)] bytes is bucket k: bytes - 1 has 4k + 9 to 4k + 12 significant bits.
  if (bytes <= kSmallest) return 0;
  const size_t b = static_cast<size_t>(std::bit_width(bytes - 1) - 5) / 4;
  return std::min(b, kSizeBuckets - 1);
}

const char* size_bucket_label(size_t bucket) {
  return bucket < kSizeLabels.size() ? kSizeLabels[bucket] : "?";
}

size_t time_bucket(uint64_t ns) {
  return static_cast<size_t>(std::lower_bound(kTimeBoundsNs.begin(), kTimeBoundsNs.end(), ns) -
                             kTimeBoundsNs.begin());
}

void CommMetrics::record(OpKind kind, uint64_t bytes, uint64_t ns, Outcome outcome) {
  const size_t k = std::min(static_cast<size_t>(kind), kKinds - 1);
  Cell& cell = cells_[k][size_bucket(bytes)];
  add(cell.ops, 1);
  add(cell.bytes, bytes);
  add(time_buckets_[k][time_bucket(ns)], 1);
  add(time_sum_ns_[k], ns);
  if (outcome == Outcome::Completed) return;
  add(cell.errors, 1);
  if (outcome == Outcome::TimedOut) add(cell.timeouts, 1);
  if (outcome == Outcome::PeerFailed) add(cell.peer_failures, 1);
}

void CommMetrics::snapshot_into(Snapshot& out) const {
  for (size_t k = 0; k < kKinds; ++k) {
    for (size_t b = 0; b < kSizeBuckets; ++b) {
      const Cell& c = cells_[k][b];
      out.cells[k][b] = {c.ops.load(kRelaxed), c.bytes.load(kRelaxed), c.errors.load(kRelaxed),
                         c.timeouts.load(kRelaxed), c.peer_failures.load(kRelaxed)};
    }
    for (size_t t = 0; t < kTimeBuckets; ++t)
      out.time_buckets[k][t] = time_buckets_[k][t].load(kRelaxed);
    out.time_sum_ns[k] = time_sum_ns_[k].load(kRelaxed);
  }
}

namespace {

using Field = uint64_t Snapshot::Cell::*;

struct CounterFamily {
  const char* name;
  Field field;
  const char* help;
};

constexpr CounterFamily kCounters[] = {
    {"ccl_operations_total", &Snapshot::Cell::ops,
     "Operations that ended (successful or not), by collective and size bucket."},
    {"ccl_operation_bytes_total", &Snapshot::Cell::bytes,
     "Bytes of the operations that ended: count x datatype size, x nranks for allgather, "
     "reducescatter and alltoall (nccl-tests' size); a send/recv group's sends and receives."},
    {"ccl_operation_errors_total", &Snapshot::Cell::errors,
     "Operations that failed, whatever the cause (timeouts and peer failures included)."},
    {"ccl_operation_timeouts_total", &Snapshot::Cell::timeouts,
     "Operations that failed with cclTimeout."},
    {"ccl_peer_failures_total", &Snapshot::Cell::peer_failures,
     "Operations that failed with cclRemoteError because a peer failed, closed its connection "
     "or aborted (not this rank's own abort or a revoke)."},
};

}  // namespace

std::string render(std::span<const Snapshot> comms) {
  TextWriter w;
  w.family("ccl_communicator_ranks", MetricType::Gauge,
           "Ranks of the communicator; one series per communicator and rank of this process.");
  for (const Snapshot& s : comms) {
    const std::string rank = std::to_string(s.rank);
    w.sample("ccl_communicator_ranks", {{"comm", s.comm}, {"rank", rank}},
             static_cast<uint64_t>(s.nranks));
  }
  for (const CounterFamily& f : kCounters) {
    w.family(f.name, MetricType::Counter, f.help);
    for (const Snapshot& s : comms) {
      const std::string rank = std::to_string(s.rank);
      for (size_t k = 0; k < kKinds; ++k) {
        for (size_t b = 0; b < kSizeBuckets; ++b) {
          const Snapshot::Cell& c = s.cells[k][b];
          if (c.ops == 0) continue;
          w.sample(f.name,
                   {{"comm", s.comm},
                    {"rank", rank},
                    {"collective", op_kind_name(static_cast<OpKind>(k))},
                    {"size", size_bucket_label(b)}},
                   c.*f.field);
        }
      }
    }
  }
  w.family("ccl_operation_seconds", MetricType::Histogram,
           "Time of the operations that ended (successful or not), from their start on this "
           "rank to their end, by collective.");
  for (const Snapshot& s : comms) {
    const std::string rank = std::to_string(s.rank);
    for (size_t k = 0; k < kKinds; ++k) {
      uint64_t count = 0;
      for (uint64_t n : s.time_buckets[k]) count += n;
      if (count == 0) continue;
      const char* collective = op_kind_name(static_cast<OpKind>(k));
      uint64_t cumulative = 0;
      for (size_t t = 0; t < kTimeBuckets; ++t) {
        cumulative += s.time_buckets[k][t];
        w.sample("ccl_operation_seconds_bucket",
                 {{"comm", s.comm},
                  {"rank", rank},
                  {"collective", collective},
                  {"le", t < kTimeBounds ? kTimeLabels[t] : "+Inf"}},
                 cumulative);
      }
      const Label labels[] = {{"comm", s.comm}, {"rank", rank}, {"collective", collective}};
      w.sample("ccl_operation_seconds_sum", labels, static_cast<double>(s.time_sum_ns[k]) * 1e-9);
      w.sample("ccl_operation_seconds_count", labels, count);
    }
  }
  return w.text();
}

}  // namespace ccl::metrics
