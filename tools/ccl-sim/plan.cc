// Candidates from the tuner and the registry, and one candidate run: the schedules of every rank,
// built as the planner builds them (src/core/comm/planner.cc), then the engine.
#include "plan.h"

#include "core/tuning/cost_model.h"

namespace ccl::sim {

namespace {

size_t chunk_of(const tune::AlgorithmEntry& entry, tune::Protocol protocol,
                const tune::Shape& shape) {
  // As Tuner::choice_of: chunk-free entries have no chunks.
  return protocol == tune::Protocol::Simple && !entry.chunk_free ? shape.chunk_bytes : 0;
}

}  // namespace

std::vector<Candidate> candidates(const tune::Tuner& tuner, tune::Collective collective,
                                  size_t bytes, bool all) {
  std::vector<Candidate> out;
  const tune::Choice choice = tuner.choose(collective, bytes);
  out.push_back({choice.entry, choice.protocol, choice.chunk_bytes, choice.predicted_us, true});
  if (!all) return out;
  const tune::CostModel model(tuner.shape(), tuner.figures());
  for (const tune::AlgorithmEntry* entry : tune::entries_of(collective)) {
    if (!tuner.selection().allows(collective, entry->algorithm)) continue;
    for (const tune::Protocol p : tune::kProtocols) {
      if (!tuner.selection().allows(collective, p)) continue;
      if (tune::unavailable(*entry, tuner.shape(), p, bytes) != nullptr) continue;
      if (entry == choice.entry && p == choice.protocol) continue;
      out.push_back({entry, p, chunk_of(*entry, p, tuner.shape()),
                     tuner.shape().nranks == 1 ? 0.0 : entry->cost(model, p, double(bytes)),
                     false});
    }
  }
  return out;
}

Outcome run_candidate(const Network& network, const Candidate& candidate, const Call& call,
                      std::span<const int> host_of_rank, std::span<const int> ring_order,
                      std::span<const int> tree_order) {
  Outcome outcome;
  const tune::AlgorithmEntry& entry = *candidate.entry;
  if (entry.build == nullptr) {
    outcome.time_us = candidate.predicted_us + network.call_overhead_us();
    return outcome;
  }
  const int n = network.nranks();
  std::vector<Program> programs;
  programs.reserve(static_cast<size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    tune::BuildArgs args;
    args.ring = {.nranks = n,
                 .rank = rank,
                 .count = call.count,
                 .chunk_elems = candidate.chunk_bytes / call.elem_size,
                 .order = ring_order};
    args.tree = args.ring;
    args.tree.order = tree_order;
    args.root = call.root;
    args.host_of_rank = host_of_rank;
    programs.push_back(program_of(entry.build(args), call.elem_size, call.in_place, call.average));
  }
  outcome.detail = simulate(network, programs);
  outcome.time_us = outcome.detail.time_us;
  outcome.simulated = true;
  return outcome;
}

std::string candidate_name(const Candidate& candidate) {
  return std::string(tune::algorithm_name(candidate.entry->algorithm)) + "/" +
         tune::protocol_name(candidate.protocol);
}

}  // namespace ccl::sim
