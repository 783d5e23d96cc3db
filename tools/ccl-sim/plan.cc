// Candidates from the tuner and the registry, and one candidate run: the schedules of every rank,
// built as the planner builds them (src/core/comm/planner.cc), then the engine.
#include "plan.h"

#include <algorithm>

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
  out.push_back({choice.entry, choice.protocol, choice.chunk_bytes, choice.predicted_us, true,
                 &tuner, bytes});
  if (!all) return out;
  const tune::CostModel model(tuner.shape(), tuner.figures());
  for (const tune::AlgorithmEntry* entry : tune::entries_of(collective)) {
    if (!tuner.selection().allows(collective, entry->algorithm)) continue;
    for (const tune::Protocol p : tune::kProtocols) {
      if (!tuner.selection().allows(collective, p)) continue;
      if (tune::unavailable(*entry, tuner.shape(), p, bytes) != nullptr) continue;
      if (entry == choice.entry && p == choice.protocol) continue;
      out.push_back({entry, p, chunk_of(*entry, p, tuner.shape()),
                     tuner.shape().nranks == 1 ? 0.0 : entry->cost(model, p, double(bytes)), false,
                     &tuner, bytes});
    }
  }
  return out;
}

namespace {

// Rank `rank`'s program for the call.
Program build_program(const tune::AlgorithmEntry& entry, const Candidate& candidate,
                      const Call& call, int n, int rank, std::span<const int> host_of_rank,
                      std::span<const int> ring_order, std::span<const int> tree_order) {
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
  return program_of(entry.build(args), call.elem_size, call.in_place, call.average);
}

// Whether `moved` is `base` with every peer moved by `shift` ranks (mod n), or XORed with it.
bool moved_by(const Program& base, const Program& moved, int shift, int n, bool by_xor) {
  if (base.round_end != moved.round_end || base.ops.size() != moved.ops.size()) return false;
  for (size_t i = 0; i < base.ops.size(); ++i) {
    const Op& a = base.ops[i];
    const Op& b = moved.ops[i];
    const int peer = a.peer < 0 ? a.peer : by_xor ? a.peer ^ shift : (a.peer + shift) % n;
    if (a.kind != b.kind || a.bytes != b.bytes || peer != b.peer) return false;
  }
  return true;
}

}  // namespace

namespace {

// The candidate's cost-model time with the figures of a CPU's copies scaled by `memory_scale`.
double cost_model_us(const Candidate& candidate, double memory_scale) {
  if (memory_scale == 1 || candidate.tuner == nullptr || candidate.tuner->shape().nranks == 1) {
    return candidate.predicted_us;
  }
  tune::Figures figures = candidate.tuner->figures();
  figures.shm.beta_gbps *= memory_scale;
  figures.direct.beta_gbps *= memory_scale;
  figures.reduce_gbps *= memory_scale;
  const tune::CostModel model(candidate.tuner->shape(), figures);
  const auto bytes = double(candidate.call_bytes);
  return candidate.entry->cost(model, candidate.protocol, bytes);
}

}  // namespace

double footprint_bytes(const Call& call, int nranks) {
  const double b = double(call.count) * double(call.elem_size);
  const double n = nranks;
  double in = b, out = b;
  switch (call.collective) {
    case tune::Collective::AllGather:  // b in, n b out
      out = n * b;
      break;
    case tune::Collective::ReduceScatter:  // n b in, b out
      in = n * b;
      break;
    case tune::Collective::AlltoAll:  // b to each peer, b from each
      in = out = n * b;
      break;
    default:  // allreduce, broadcast, reduce: the vector in and out; barrier: nothing
      break;
  }
  return call.in_place ? std::max(in, out) : in + out;
}

Outcome run_candidate(const Network& network, const Candidate& candidate, const Call& call,
                      std::span<const int> host_of_rank, std::span<const int> ring_order,
                      std::span<const int> tree_order, bool explain) {
  Outcome outcome;
  const tune::AlgorithmEntry& entry = *candidate.entry;
  const double memory_scale =
      network.memory_scale(uint64_t(footprint_bytes(call, network.nranks())));
  const auto model_only = [&](std::string note) {
    outcome.time_us =
        cost_model_us(candidate, memory_scale) +
        (entry.build == nullptr ? network.direct_overhead_us() : network.call_overhead_us());
    outcome.note = std::move(note);
    return outcome;
  };
  if (entry.build == nullptr) return model_only("cost model: no schedule");
  const auto simulated = [&](const std::vector<Program>& programs, int period, bool by_xor) {
    SimOptions options{
        .period = period, .xor_symmetry = by_xor, .explain = explain, .memory_scale = memory_scale};
    outcome.simulated = true;
    outcome.ranks_run = int(programs.size());
    if (call.calls <= 1) {
      outcome.detail = simulate(network, programs, options);
      outcome.time_us = outcome.detail.time_us;
      return outcome;
    }
    // The steady state of back-to-back calls: what the calls after the first add, each.
    std::vector<Program> many;
    many.reserve(programs.size());
    for (const Program& p : programs) {
      many.push_back(repeated(p, call.calls, network.call_overhead_us()));
    }
    outcome.detail = simulate(network, many, options);
    options.explain = false;
    const double one = simulate(network, programs, options).time_us;
    outcome.time_us = (outcome.detail.time_us - one) / (call.calls - 1);
    return outcome;
  };
  const int n = network.nranks();
  const auto build = [&](int rank) {
    return build_program(entry, candidate, call, n, rank, host_of_rank, ring_order, tree_order);
  };
  std::vector<Program> programs;
  // A quotient where the network and the schedule are symmetric: representatives 0..P-1, and
  // samples of the other orbits' members checked against them (the first, a middle and the last
  // image of ranks 0, P/2 and P-1, which are r + kP under either move). Moves by addition
  // first (rings, pairwise exchanges, hierarchies), then by XOR where the network allows it
  // (recursive doubling, Rabenseifner).
  const int period = network.symmetry_period();
  if (period < n) {
    for (int r = 0; r < period; ++r) programs.push_back(build(r));
    struct Sample {
      int rank, shift;
      Program image;  // rank + shift's program
    };
    std::vector<Sample> samples;
    for (const int k : {1, n / period / 2, n / period - 1}) {
      for (const int r : {0, period / 2, period - 1}) {
        if (k >= 1) samples.push_back({r, k * period, build(r + k * period)});
      }
    }
    for (const bool by_xor : {false, true}) {
      if (by_xor && !network.xor_symmetric()) break;
      bool symmetric = true;
      for (const Sample& s : samples) {
        symmetric = symmetric && moved_by(programs[size_t(s.rank)], s.image, s.shift, n, by_xor);
      }
      if (symmetric) return simulated(programs, period, by_xor);
    }
    programs.clear();
  }
  // The whole job, if its programs fit: they are built rank by rank and counted, and the run
  // is given up as soon as they pass the budget.
  programs.reserve(size_t(n));
  uint64_t ops = 0;
  const auto calls = uint64_t(std::max(1, call.calls));
  for (int rank = 0; rank < n; ++rank) {
    programs.push_back(build(rank));
    ops += uint64_t(programs.back().ops.size()) * calls;
    if (ops > call.max_ops) {
      return model_only("cost model: over " + std::to_string(call.max_ops) + " steps by rank " +
                        std::to_string(rank) + " of " + std::to_string(n) +
                        ", not symmetric, too large to simulate");
    }
  }
  return simulated(programs, 0, false);
}

std::string candidate_name(const Candidate& candidate) {
  return std::string(tune::algorithm_name(candidate.entry->algorithm)) + "/" +
         tune::protocol_name(candidate.protocol);
}

}  // namespace ccl::sim
