// What to simulate for one (collective, size): the tuner's pick and every other (algorithm,
// protocol) the registry has available for the shape, each run as every rank's real schedule over
// the network. Entries that run without a schedule (the direct path of one host, entries/direct.cc)
// are given their cost model's time and marked so: the simulator has no steps to run for them.
#pragma once

#include <cstddef>
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
  double predicted_us = 0;  // the tuner's cost model
  bool pick = false;        // the tuner's choice
};

/// The pick first, then (with `all`) every other available pair allowed by the tuner's selection,
/// in the registry's order.
std::vector<Candidate> candidates(const tune::Tuner& tuner, tune::Collective collective,
                                  size_t bytes, bool all);

/// One collective call's arguments as the simulator needs them.
struct Call {
  tune::Collective collective = tune::Collective::AllReduce;
  size_t count = 0;  // elements, in the tuner's convention (algo_selection.h)
  size_t elem_size = 4;
  int root = 0;
  bool in_place = false;
  bool average = false;  // cclAvg: Finalize steps divide
};

struct Outcome {
  double time_us = 0;
  bool simulated = false;  // false: the entry has no schedule; time_us is its cost model's
  SimResult detail;        // when simulated
};

/// Builds every rank's schedule with the entry's own builder (ring order, tree order and hosts
/// from `host_of_rank` and `ring_order`/`tree_order`, as the planner passes them), turns each into
/// a Program and runs them all.
Outcome run_candidate(const Network& network, const Candidate& candidate, const Call& call,
                      std::span<const int> host_of_rank, std::span<const int> ring_order,
                      std::span<const int> tree_order);

/// "ring/Simple", "direct/LL" ...
std::string candidate_name(const Candidate& candidate);

}  // namespace ccl::sim
