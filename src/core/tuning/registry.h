// The algorithm registry (DESIGN.md "The registry"): one table of entries, each an algorithm for
// one collective with what the tuner and the communicator need of it:
//   availability  why it cannot run a call (shape, protocol, size), or nullptr
//   cost          its predicted time (the closed-form model, cost_model.h's notation)
//   build or run  the schedule the executor runs, or the operation run at once (the direct
//                 shared-window collectives)
// The tuner walks the entries of a collective (tuner.h); CCL_ALGO / CCL_PROTO select among them
// (algo_selection.h); the communicator runs the chosen entry (comm_collectives.cc). Selection
// policy stays out of the entries.
//
// Adding an algorithm: one file in entries/ that defines its entries (see entries/ring.cc), and
// one line in registry.cc's table (plus, for a new name, one value in algo_selection.h's
// Algorithm and its name).
#pragma once

#include <cstddef>
#include <span>

#include "algorithms/executor.h"
#include "algorithms/schedule.h"
#include "base/deadline.h"
#include "core/tuning/cost_model.h"

namespace ccl::algo {
class DirectCollectives;
}

namespace ccl::tune {

// What a schedule builder gets: the call's shape with the choice's chunking.
struct BuildArgs {
  algo::ScheduleParams ring;  // positions in the ring order
  algo::ScheduleParams tree;  // positions in the tree order
  int root = -1;              // broadcast, reduce
  std::span<const int> host_of_rank;
};

// What a direct entry's run gets. Buffers and count as the collective's call has them (input is
// the reduction's input, after PreMulSum scaling); `bytes` as the tuner saw it.
struct RunArgs {
  algo::DirectCollectives& direct;
  const void* input;
  void* output;
  size_t bytes;
  size_t count;
  const algo::ExecOp& op;
  int root;
  Protocol protocol;
  Deadline deadline;
  const algo::OpLabel& label;
};

struct AlgorithmEntry {
  Collective collective;
  Algorithm algorithm;
  // Why this entry cannot run `bytes` with `protocol` on `shape`, beyond the rules every entry
  // shares (registry.cc: no LL128, Simple needs a chunk size unless `chunk_free`); nullptr if it
  // can. A string literal.
  const char* (*unavailable)(const Shape& shape, Protocol protocol, size_t bytes);
  // Predicted microseconds; asked only when available and nranks > 1.
  double (*cost)(const CostModel& model, Protocol protocol, double bytes);
  // Exactly one of the two.
  algo::Schedule (*build)(const BuildArgs& args);
  void (*run)(const RunArgs& args);
  // Its Simple form needs no chunk size (the direct path: Simple names its two-shot form).
  bool chunk_free = false;
};

// Every entry, collective by collective, each collective's in the tuner's order of preference
// (on a tie the earlier wins): the order of Algorithm.
std::span<const AlgorithmEntry* const> registry();
// The entries of one collective, in that order.
std::span<const AlgorithmEntry* const> entries_of(Collective collective);
// The entry of (collective, algorithm), or nullptr if that algorithm does not serve it.
const AlgorithmEntry* find_entry(Collective collective, Algorithm algorithm);
// Why `entry` cannot run (the shared rules, then its own), or nullptr.
const char* unavailable(const AlgorithmEntry& entry, const Shape& shape, Protocol protocol,
                        size_t bytes);

}  // namespace ccl::tune
