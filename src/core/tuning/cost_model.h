// The tuner's cost model (DESIGN.md principle 3): the predicted time of one collective for each
// (algorithm, protocol), in closed form from a few per-link figures.
//
// Every step of a schedule costs alpha + bytes / beta on the link it crosses; the reduction of
// x bytes costs x / reduce_gbps; a pipeline of K chunks through a path of depth D costs about
// (D + K - 1) rounds. The formulas, derived from the schedules' own descriptions, are written
// next to each one in cost_model.cc. A step between two ranks of one host runs at the shm figures
// (the net ones when shm is off), a step between hosts at the net ones; a flat algorithm spanning
// hosts is paced by its slowest link.
//
// predict_us is a pure function of its arguments: every rank computes the same numbers from the
// same Shape and Figures, and so makes the same choice (ranks that chose differently would
// deadlock). The caller must make the Figures the same on every rank (one rank's probe, or a
// file). A prediction allocates nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>

#include "core/tuning/algo_selection.h"

namespace ccl::tune {

// One link class: time of a step of x bytes = alpha_us + x / (beta_gbps * 1e3) microseconds
// (beta in GB/s = 1e9 bytes per second).
struct LinkFigures {
  double alpha_us = 0;
  double beta_gbps = 1;
};

struct Figures {
  LinkFigures shm;     // one step between two ranks of one host over the shared-memory transport
  LinkFigures net;     // one step between hosts (tcp), also used inside a host when shm is off
  LinkFigures direct;  // the shared window: alpha = one synchronisation, beta = copy bandwidth
  double reduce_gbps = 1;  // bytes reduced per second by one rank (memory-bound sum), GB/s
};

// Figures for the 2-core test VM, from its measurements (see cost_model.cc); a probe or
// CCL_TUNER_FILE replaces them.
Figures default_figures();
// Throws InvalidArgument unless every alpha is finite and >= 0 and every beta and reduce_gbps is
// finite and > 0; `where` prefixes the message ("tuner figures", "file.txt").
void check_figures(const Figures& figures, const char* where);

// What the communicator looks like to the model.
struct Shape {
  int nranks = 1;
  int nhosts = 1;
  int ranks_per_host = 1;     // the largest number of ranks on one host
  bool uniform_hosts = true;  // every host has ranks_per_host ranks
  bool shm = true;            // the ranks of a host talk over shared memory
  size_t window_bytes = 0;  // direct path capacity; 0: no direct path (only with nhosts == 1, shm)
  size_t chunk_bytes = 0;   // the Simple protocol's pipeline chunk; 0: no Simple
};
// Throws InvalidArgument on an inconsistent shape (nranks < 1, more hosts than ranks, ...).
void check_shape(const Shape& shape);

// The model for one (Shape, Figures), with what does not depend on the message precomputed, so
// that a prediction is a few multiplications (the tuner asks ~20 of them per collective call).
// The formulas themselves live with their algorithms, in the registry's entries
// (core/tuning/entries/*.cc); this class holds the terms they share.
class CostModel {
 public:
  // A link: time of a step of x bytes = a + x * inv microseconds.
  struct Link {
    double a = 0;    // us per step
    double inv = 0;  // us per byte
    double step(double bytes) const { return a + bytes * inv; }
  };
  // The terms of the formulas (notation in cost_model.cc).
  struct Terms {
    double n = 1;            // ranks
    double chunk_bytes = 0;  // the Simple protocol's chunk (Shape::chunk_bytes)
    Link intra, net, flat, direct, fold;
    double reduce_inv = 0;   // us per byte reduced
    double tree_height = 0;  // ceil(log2 n)
    // Over both trees of the double binary tree, the most halves (S/2) one rank sends (one per
    // child and one to its parent, in each tree), and the most it reduces (one per child).
    double tree_sent_halves = 0;
    double tree_reduced_halves = 0;
    // Recursive doubling / Rabenseifner over p = 2^floor(log2 n) ranks: their exchange rounds
    // summed, sum_d (a_d + S inv_d) = rd_a + S rd_inv and sum_d 2 (a_d + S d/p inv_d) =
    // rab_a + S rab_inv, and the number of rounds log2 p.
    double pow2 = 1, log2_pow2 = 0;
    double rd_a = 0, rd_inv = 0, rab_a = 0, rab_inv = 0;

    // K: 1 for LL, ceil(piece / c) for Simple.
    double chunks(double piece, Protocol protocol) const;
    double reduce(double bytes) const { return bytes * reduce_inv; }
  };

  // Expects a shape and figures that passed the checks.
  CostModel(const Shape& shape, const Figures& figures);

  // Predicted microseconds of `collective` on `bytes` (the convention of algo_selection.h) with
  // `algorithm` and `protocol`, or nullopt when that pair is not available for it; then *why
  // (when given) names the reason, a string literal. Asks the registry's entry.
  std::optional<double> predict_us(Collective collective, Algorithm algorithm, Protocol protocol,
                                   size_t bytes, const char** why = nullptr) const;

  const Shape& shape() const { return shape_; }
  const Terms& terms() const { return terms_; }

 private:
  Shape shape_;
  Terms terms_;
};

// CostModel(shape, figures).predict_us(...), for one-off questions.
std::optional<double> predict_us(Collective collective, Algorithm algorithm, Protocol protocol,
                                 size_t bytes, const Shape& shape, const Figures& figures,
                                 const char** why = nullptr);

}  // namespace ccl::tune
