// Runs every rank's schedule on real doubles (op: sum; Finalize divides by nranks), ranks in
// lockstep like the symbolic verifier, sends buffered. The verifier proves which contributions
// reach each element; this shows the bits: floating-point sums depend on the order of the
// additions, so ranks that each reduce in their own order end with different bits, and builders
// that promise identical results on every rank can be held to it.
#pragma once

#include <string>
#include <vector>

#include "algorithms/schedule.h"

namespace ccl::algo::test {

struct NumericRun {
  std::string error;                        // "" when every schedule ran to completion
  std::vector<std::vector<double>> output;  // each rank's Output
};

// inputs[r] is rank r's Input (all the same length, the allreduce count). In place, Input and
// Output are one buffer.
NumericRun run_numeric_allreduce(const std::vector<Schedule>& schedules,
                                 const std::vector<std::vector<double>>& inputs, bool in_place);

// Values of widely different magnitudes (2^-20..2^20, both signs), so a different order of
// additions almost always shows in the bits. Deterministic in (rank, count).
std::vector<double> spread_values(int rank, size_t count);

}  // namespace ccl::algo::test
