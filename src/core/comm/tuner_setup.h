// The planner's tuner, made at init: the figures of the communicator's links (from CCL_TUNER_FILE,
// from rank 0's tuner cache (CCL_TUNER_CACHE), or a probe that times a few real operations over
// the links, then kept in that cache), rank 0's for everyone, and what CCL_ALGO/CCL_PROTO allow.
// It runs once, between the peers' connection and the communicator's first operation; it drives
// the op runner and the direct collectives, and hands the tuner to the planner.
#pragma once

#include <string>

#include "algorithms/executor.h"
#include "core/comm/op_runner.h"
#include "core/comm/options.h"
#include "core/comm/peers.h"
#include "core/comm/planner.h"
#include "core/tuning/tuner.h"

namespace ccl {

class TunerSetup {
 public:
  TunerSetup(const CommOptions& options, Peers& peers, Planner& planner, OpRunner& runner)
      : options_(options), peers_(peers), planner_(planner), runner_(runner) {}

  // Probes or reads the figures, shares rank 0's and gives the planner its tuner. Collective.
  void run();

 private:
  tune::Figures probe_figures(const tune::Shape& shape);
  void probe_direct(tune::Figures* figures, const float* in, float* out, const algo::ExecOp& sum);
  void fit_net_by_exchange(const tune::Shape& shape, tune::Figures* figures, const float* in,
                           float* out, const algo::ExecOp& sum);
  // The figures of rank 0's tuner cache entry for this shape (core/tuning/figures_cache.h), or
  // probed and then kept there; returns where they came from, for the log.
  std::string probe_or_recall(const tune::Shape& shape, tune::Figures* figures);
  // Rank 0's `bytes` at `data` to every rank (trivially copyable data).
  void share_from_rank0(void* data, size_t bytes);

  const CommOptions& options_;
  Peers& peers_;
  Planner& planner_;
  OpRunner& runner_;
};

}  // namespace ccl
