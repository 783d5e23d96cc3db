// The planner's tuner, made at init: the figures of the communicator's links (from CCL_TUNER_FILE,
// or a probe that times a few real operations over the links), rank 0's for everyone, and what
// CCL_ALGO/CCL_PROTO allow. It runs once, between the peers' connection and the communicator's
// first operation; it drives the op runner and the direct collectives, and hands the tuner to the
// planner.
#pragma once

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
  void share_figures(tune::Figures* figures);

  const CommOptions& options_;
  Peers& peers_;
  Planner& planner_;
  OpRunner& runner_;
};

}  // namespace ccl
