// The tuner (DESIGN.md principle 3): for each collective call, the (algorithm, protocol) with the
// smallest predicted time (core/tuning/cost_model.h) among those available and allowed by
// CCL_ALGO / CCL_PROTO, and, when asked, why.
//
// choose() runs on every collective call: it walks the collective's entries of the algorithm
// registry (registry.h), allocates nothing and builds no string (at most ~15 closed-form
// predictions, a few multiplications each). choose_explained() adds the reason, for
// logs; cost_table() prints every row, for CCL_DEBUG_SUBSYS=TUNE. Every rank must build its Tuner
// from the same Shape, Figures and Selection, so that all ranks choose the same schedule.
//
// Example:
//   Tuner tuner(shape, default_figures(), Selection::parse(algo_env, proto_env));
//   Choice c = tuner.choose(Collective::AllReduce, count * elem_size);
//   if (c.fallback) warn_once(tuner.choose_explained(...).reason);
#pragma once

#include <cstddef>
#include <string>

#include "core/tuning/algo_selection.h"
#include "core/tuning/cost_model.h"

namespace ccl::tune {

struct AlgorithmEntry;

struct Choice {
  const AlgorithmEntry* entry = nullptr;  // the registry's entry (registry.h) that runs it
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::LL;
  size_t chunk_bytes = 0;  // the pipeline chunk; 0 = no chunking (LL, and the direct path)
  double predicted_us = 0;
  // Only from choose_explained(): e.g. "ring/Simple 812.4 us < tree/Simple 990.1 us (next best)".
  std::string reason;
  // CCL_ALGO / CCL_PROTO left nothing available for this call: this is the unrestricted choice.
  bool fallback = false;
};

class Tuner {
 public:
  // Throws InvalidArgument on an inconsistent shape or figures.
  Tuner(Shape shape, Figures figures, Selection selection);

  // The fastest allowed and available (algorithm, protocol) for `bytes` (algo_selection.h's
  // convention); an algorithm later in declaration order must be predicted 15% faster than an
  // earlier one to displace it (the model's error, tuner.cc), protocols of one algorithm just
  // faster; ties go to the earlier algorithm, then protocol. If the
  // selection allows nothing available, the fastest available one, with `fallback` set.
  // Allocation-free; `reason` stays empty.
  Choice choose(Collective collective, size_t bytes) const;
  // The same choice with `reason` filled in.
  Choice choose_explained(Collective collective, size_t bytes) const;
  // One line per (algorithm, protocol): the predicted time, "n/a: <why>" or "excluded by
  // CCL_ALGO" / "excluded by CCL_PROTO"; a header line with the shape and a last line with the
  // choice and its reason.
  std::string cost_table(Collective collective, size_t bytes) const;

  const Shape& shape() const { return shape_; }
  const Figures& figures() const { return figures_; }
  const Selection& selection() const { return selection_; }

 private:
  struct Candidate {
    const AlgorithmEntry* entry;
    Protocol protocol;
    double us;
  };
  struct Ranking {
    int count = 0;  // candidates seen
    Candidate best{}, second{};
  };
  Ranking rank(Collective collective, size_t bytes, bool restricted) const;
  Choice choice_of(const Candidate& best, bool fallback) const;

  Shape shape_;
  Figures figures_;
  Selection selection_;
  CostModel model_;
};

// The figures in a text file of "key value" lines: shm.alpha_us, shm.beta_gbps, net.alpha_us,
// net.beta_gbps, direct.alpha_us, direct.beta_gbps, reduce_gbps. '#' starts a comment; keys left
// out keep their default_figures() value. Throws InvalidArgument naming file:line on an unknown
// or repeated key, a malformed or out-of-range value, or an unreadable file.
Figures read_figures_file(const std::string& path);
// The same format, every key, values written so that reading them back gives the same doubles.
std::string format_figures(const Figures& figures);

}  // namespace ccl::tune
