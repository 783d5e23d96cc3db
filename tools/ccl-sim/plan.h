// What to simulate for one (collective, size): the tuner's pick and every other (algorithm,
// protocol) the registry has available for the shape, each run as every rank's real schedule over
// the network. Entries that run without a schedule (the direct path of one host, entries/direct.cc)
// are given their cost model's time and marked so: the simulator has no steps to run for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tuning/registry.h"
#include "core/tuning/tuner.h"
#include "engine.h"
#include "network.h"

namespace ccl::sim {

struct Candidate {
  const tune::AlgorithmEntry* entry = nullptr;
  tune::Protocol protocol = tune::Protocol::LL;
  size_t chunk_bytes = 0;
  double predicted_us = 0;             // the tuner's cost model
  bool pick = false;                   // the tuner's choice
  const tune::Tuner* tuner = nullptr;  // whose shape and figures predicted it
  size_t call_bytes = 0;               // what the tuner was asked about
};

/// The pick first, then (with `all`) every other available pair allowed by the tuner's selection,
/// in the registry's order.
std::vector<Candidate> candidates(const tune::Tuner& tuner, tune::Collective collective,
                                  size_t bytes, bool all);

/// How large a run may be by default: the ops of every simulated rank's program together (16 B
/// each: 1 GiB). Measured: 65,536 ranks, 8 B-1 GiB by 2, --pick-only, in 4.4 min and 4.3 GiB
/// here, the double binary tree at 512 MiB and 1 GiB over it (at 200 Mi, 512 MiB alone took
/// 5.4 min and 1 GiB more than 9 GiB).
inline constexpr uint64_t kMaxSimulatedOps = uint64_t{64} << 20;

/// One collective call's arguments as the simulator needs them.
struct Call {
  tune::Collective collective = tune::Collective::AllReduce;
  size_t count = 0;  // elements, in the tuner's convention (algo_selection.h)
  size_t elem_size = 4;
  int root = 0;
  bool in_place = false;
  bool average = false;  // cclAvg: Finalize steps divide
  /// Calls back to back (program.h repeated), as nccl-tests times them: the time is one call's
  /// in the steady state, (T(calls) - T(1)) / (calls - 1). 1: one call alone.
  int calls = 1;
  /// The largest run simulated: the ops of every simulated rank's program together, calls
  /// included (16 B each); a larger one gets the cost model's time.
  uint64_t max_ops = kMaxSimulatedOps;
};

struct Outcome {
  double time_us = 0;
  bool simulated = false;  // false: not run (no schedule, or too large); see `note`
  int ranks_run = 0;       // ranks simulated: all, or the representatives of a quotient
  SimResult detail;        // when simulated
  std::string note;        // why it was not simulated ("cost model: no schedule", ...)
};

/// The bytes of user buffers one rank's call touches: its input and its output (one buffer in
/// place), by the tuner's count convention (algo_selection.h).
double footprint_bytes(const Call& call, int nranks);

/// Builds every rank's schedule with the entry's own builder (ring order, tree order and hosts
/// from `host_of_rank` and `ring_order`/`tree_order`, as the planner passes them), turns each into
/// a Program and runs them all. Where the network has a symmetry period P < n and the schedule
/// has it too (rank r + kP's program is rank r's with peers moved by kP, checked on sampled ranks
/// and orbits), only ranks 0..P-1 run, exactly (engine.h). A run whose programs would hold more
/// than call.max_ops ops is not simulated: `note` says so and time_us is the cost model's,
/// with the figures of a CPU's copies (shm, direct, reduce) scaled by the network's memory_scale
/// for the call, as the simulated links are.
/// `explain`: detail carries the critical path (engine.h).
Outcome run_candidate(const Network& network, const Candidate& candidate, const Call& call,
                      std::span<const int> host_of_rank, std::span<const int> ring_order,
                      std::span<const int> tree_order, bool explain = false);

/// "ring/Simple", "direct/LL" ...
std::string candidate_name(const Candidate& candidate);

}  // namespace ccl::sim
