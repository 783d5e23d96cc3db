// Learning-rate schedules (optim.hpp): Goyal et al.'s linear scaling rule, and linear warm-up
// followed by polynomial decay.
#include <cmath>
#include <stdexcept>
#include <string>

#include "ccl/training/optim.hpp"
#include "optim/param_checks.h"

namespace ccl::training {

using optim_detail::shortest_number;

double linear_scaled_lr(double base_lr, size_t batch, size_t base_batch) {
  if (base_batch == 0) throw std::invalid_argument("ccl::training::linear_scaled_lr: base_batch 0");
  return base_lr * static_cast<double>(batch) / static_cast<double>(base_batch);
}

double WarmupPolyDecay::operator()(int64_t step) const {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("ccl::training::WarmupPolyDecay: " + what);
  };
  if (warmup_steps < 0) fail("warmup_steps " + std::to_string(warmup_steps) + " < 0");
  if (total_steps < warmup_steps) {
    fail("total_steps " + std::to_string(total_steps) + " < warmup_steps " +
         std::to_string(warmup_steps));
  }
  if (!(power >= 0)) fail("power " + shortest_number(power) + " is not >= 0");  // NaN too
  // Steps count from 0; a negative one is a caller's mistake, not a point of the schedule.
  if (step < 0) fail("step " + std::to_string(step) + " < 0");

  if (step < warmup_steps) {
    return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  // From total_steps on, end_lr; this also covers total_steps == warmup_steps (no decay phase).
  if (step >= total_steps) return end_lr;
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  return (peak_lr - end_lr) * std::pow(1 - progress, power) + end_lr;
}

}  // namespace ccl::training
