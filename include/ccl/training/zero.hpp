/**
 * @file training/zero.hpp
 * @brief ZeRO (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
 * Models", 2020) over a data-parallel communicator: optimizer state sharded (stage 1), gradients
 * reduce-scattered into shards as the backward pass produces them (stage 2), parameters sharded
 * and all-gathered before use with the next unit prefetched (stage 3); mixed precision (fp16 or
 * bf16 on the wire and in the working copy, float32 master shards); a checkpoint of the sharded
 * state, one file per rank.
 *
 * Part of the training layer (`#include <ccl/training.hpp>`, in libccl).
 *
 * Layout. Parameters are grouped in *units* (ZeroParam::unit: a layer, or a bucket of layers;
 * assign_zero_units groups consecutive parameters by size). A unit is one flat buffer, its
 * parameters one after the other, padded to a multiple of the group size N; rank r owns the r-th
 * of its N equal slices. A unit is what is reduce-scattered (its gradients) and all-gathered (its
 * parameters) in one operation, so every rank's share of every exchange is its own slice. The
 * optimizer steps on this rank's pieces of the parameters (Optimizer::step_sharded: LAMB and LARS
 * sum their per-tensor norms over the group).
 *
 * Per rank, with P parameter bytes (float32), S optimizer-state bytes and N ranks (memory()
 * reports what is held, peak_memory() what was held when the total was highest):
 *   stage 1: working parameters P, gradients P (whole; the reduce-scatter leaves the average in
 *            the rank's own slice, in place), optimizer state S/N;
 *   stage 2: gradients P/N plus the whole gradients of the units whose reduction is in flight
 *            (ZeroOptions::reductions_in_flight) and of the one being written;
 *   stage 3: working parameters only for the gathered units, master P/N (the parameters' only
 *            lasting copy), gradients as in stage 2, optimizer state S/N.
 * fp16 / bf16 halve the bytes on the wire, not the memory: the working copy stays float32 (the
 * caller computes in float32) holding 16-bit values, stage 1 and 2 add float32 masters (P/N),
 * and a unit's 16-bit gradient is a second buffer while its reduction is in flight
 * (perf/README.md, "ZeRO", has the measured figures).
 *
 * Protocol (every rank calls the same sequence; stage 1 and 2 ignore gather/release):
 * @code
 * ccl::training::Zero zero(mesh.dp(), params, std::make_unique<ccl::training::Adam>(opts),
 *                          {.stage = 3, .precision = ccl::training::ZeroPrecision::Bf16});
 * for (size_t i = 0; i < params.size(); ++i) zero.load_full(i, initial[i]);  // same on all ranks
 * for (step...) {
 *   for (unit u = 0..U-1)  { zero.gather(u); forward with zero.param(i); zero.release(u); }
 *   for (unit u = U-1..0)  { zero.gather(u); backward: write zero.grad(i), zero.mark_ready(i);
 *                            zero.release(u); }
 *   zero.step();  // gradients averaged over the group, then the optimizer on the shards
 * }
 * zero.save("ckpt/step100");  // ckpt/step100.zero-<rank>-of-<N>
 * @endcode
 */
#ifndef CCL_TRAINING_ZERO_HPP_
#define CCL_TRAINING_ZERO_HPP_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../ccl.hpp"
#include "optim.hpp"

namespace ccl::training {

/// What parameters and gradients travel as (and the working parameters are rounded to).
enum class ZeroPrecision { Fp32, Fp16, Bf16 };

/// One parameter tensor of `count` float32 values.
struct ZeroParam {
  size_t count = 0;
  /// A bias or normalization weight: no weight decay, no trust ratio (see optim.hpp).
  bool exclude = false;
  /// Its unit: units are numbered 0, 1, … in forward order; a unit's parameters are contiguous
  /// in this list (unit numbers never decrease along it).
  size_t unit = 0;
};

struct ZeroOptions {
  /// 1, 2 or 3.
  int stage = 2;
  ZeroPrecision precision = ZeroPrecision::Fp32;
  /// Stage 3: how many units gather() starts ahead of the one asked for, in the order the
  /// previous iteration gathered them (none in the first iteration). 0: no prefetch.
  int prefetch = 1;
  /// Stage 2 and 3: at most this many units' reduce-scatters queued at once; launching another
  /// first waits for the oldest, whose whole gradient then goes. It bounds the gradients held to
  /// the slices plus this many whole units (with no bound, a backward pass faster than the
  /// exchanges holds every unit's whole gradient at its end, as stage 1 does). At least 1.
  int reductions_in_flight = 2;
};

/// Bytes a rank holds, by kind (memory(), peak_memory()).
struct ZeroMemory {
  size_t parameters = 0;  ///< working copies (whole, or the gathered units in stage 3)
  size_t master = 0;      ///< float32 master shards (stage 3, or a 16-bit precision)
  size_t gradients = 0;   ///< whole gradients (stage 1) or shards plus units in flight
  size_t optimizer = 0;   ///< optimizer state (Optimizer::state_bytes)
  size_t total() const { return parameters + master + gradients + optimizer; }
};

/// Units for `counts` parameters: consecutive parameters grouped up to `unit_bytes` of float32
/// each (a parameter larger than that is a unit of its own). Returns the unit of each parameter.
std::vector<size_t> assign_zero_units(std::span<const size_t> counts, size_t unit_bytes);

/// Where one unit's pieces lie (pure; zero_layout and the tests use it).
struct ZeroUnitLayout {
  size_t first_param = 0;       ///< its first parameter's index
  size_t params = 0;            ///< how many parameters
  size_t count = 0;             ///< elements of its parameters
  size_t shard = 0;             ///< elements per rank: ceil(count / N)
  std::vector<size_t> offsets;  ///< each parameter's offset in the unit's flat buffer
};

/// The units of `params` for a group of `nranks`; throws std::invalid_argument (naming the
/// parameter) when units are not contiguous, when a count is 0, or when nranks < 1.
std::vector<ZeroUnitLayout> zero_layout(std::span<const ZeroParam> params, int nranks);

/// Rank `rank`'s pieces of unit `u`: (parameter index, offset in the parameter, offset in the
/// rank's slice, count), in order; empty when the slice is padding only.
struct ZeroPiece {
  size_t param = 0;
  size_t param_offset = 0;
  size_t shard_offset = 0;
  size_t count = 0;
};
std::vector<ZeroPiece> zero_pieces(const ZeroUnitLayout& unit, int rank);

/**
 * @brief One rank's ZeRO engine over the data-parallel group `dp` (which it borrows: it must
 * outlive the engine). The exchanges run on the engine's own ccl stream, so gradient reductions
 * (stage 2 and 3) and parameter prefetches overlap the caller's computation. Every wait is bounded
 * by the communicator's timeout; a failed exchange throws ccl::Error from the call that waits.
 * Misuse (a parameter out of range, param() of a unit not gathered, a gradient marked twice, step()
 * with gradients not marked in stage 2/3) throws std::logic_error or std::out_of_range naming it.
 */
class Zero {
 public:
  Zero(Communicator& dp, std::span<const ZeroParam> params, std::unique_ptr<Optimizer> optimizer,
       ZeroOptions options = {});
  ~Zero();
  Zero(const Zero&) = delete;
  Zero& operator=(const Zero&) = delete;

  /// Sets parameter `param` from its whole value (`values.size()` must be its count); every rank
  /// passes the same values (each keeps its slice, and in stage 1 and 2 the working copy).
  void load_full(size_t param, std::span<const float> values);

  /// Stage 3: makes unit `unit`'s parameters present (all-gathered, or waits for its prefetch)
  /// and starts the prefetch of the next units; stage 1 and 2: nothing (always present).
  void gather(size_t unit);
  /// Stage 3: frees the unit's working parameters; stage 1 and 2: nothing.
  void release(size_t unit);

  /// The working value of `param` (whole, float32, rounded to the precision); in stage 3 only
  /// between gather and release of its unit. Valid until release (stage 3) or step().
  std::span<float> param(size_t param);
  /// Where the backward pass writes (or accumulates) `param`'s gradient: zero at the start of
  /// each iteration. Valid until mark_ready (stage 2, 3) or step() (stage 1).
  std::span<float> grad(size_t param);
  /// `param`'s gradient is complete: when all of its unit's are, stage 2 and 3 start the unit's
  /// reduce-scatter (units in decreasing order, so every rank issues them alike).
  void mark_ready(size_t param);
  /// Averages the gradients over the group (stage 1 now; stage 2 and 3 wait for theirs), steps
  /// the optimizer on this rank's pieces, and (stage 1, 2) all-gathers the new parameters.
  void step();

  /// Collective: `param`'s whole master value (float32), from every rank's slices.
  std::vector<float> gather_full(size_t param);

  /// Writes this rank's slices (master values, optimizer state, step count) to
  /// `prefix + ".zero-<rank>-of-<N>"`. Not collective. Throws ccl::Error (cclSystemError) on an
  /// I/O failure.
  void save(const std::string& prefix) const;
  /// Reads what save wrote for this rank and, stage 1 and 2, all-gathers the working copy
  /// (collective then). Throws std::invalid_argument naming what does not match (group size,
  /// stage, parameter counts, optimizer).
  void load(const std::string& prefix);

  ZeroMemory memory() const;
  /// What was held when the total was highest since construction (or reset_peak_memory).
  ZeroMemory peak_memory() const;
  void reset_peak_memory();

  Optimizer& optimizer() { return *optimizer_; }
  const ZeroOptions& options() const { return options_; }
  const std::vector<ZeroUnitLayout>& units() const { return units_; }
  /// Bytes this rank sent so far (its share of every exchange, in the precision).
  uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  struct UnitState;
  UnitState& unit_of(size_t param, const char* what);
  void check_unit(size_t unit, const char* what) const;
  void launch_gather(size_t unit);
  void wait_gather(size_t unit);
  void launch_reduce(size_t unit);
  void finish_oldest_reduce();
  void gather_working_copies();
  void track_memory();

  Communicator& dp_;
  std::vector<ZeroParam> params_;
  std::unique_ptr<Optimizer> optimizer_;
  ZeroOptions options_;
  std::vector<ZeroUnitLayout> units_;
  std::vector<std::unique_ptr<UnitState>> state_;
  std::vector<ParamRef> pieces_;  // this rank's optimizer pieces, over every unit
  Stream stream_;
  size_t next_reduce_ = 0;            // units reduce in decreasing order: how many launched
  std::deque<size_t> reducing_;       // units whose reduce-scatter is queued, oldest first
  std::vector<size_t> gather_order_;  // this iteration's gather() calls (stage 3)
  std::vector<size_t> last_order_;    // the previous iteration's
  ZeroMemory peak_;
  uint64_t bytes_sent_ = 0;
};

}  // namespace ccl::training

#endif  // CCL_TRAINING_ZERO_HPP_
