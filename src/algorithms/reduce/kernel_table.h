// Internal: the per-ISA kernel tables behind reduce.h's dispatch. Each table lives in the file
// compiled with its ISA's flags; dispatch.cc only hands out a table after checking the CPU.
#pragma once

#include "algorithms/reduce/reduce.h"

namespace ccl::reduce {

// Base ops in table order; cclAvg reduces as cclSum (its division is a separate step).
constexpr int kNumBaseOps = 4;  // sum, prod, max, min (the cclRedOp_t values 0..3)

struct KernelTable {
  ReduceFn reduce[cclNumTypes][kNumBaseOps];
  // nullptr where the ISA has no vector divide (integer division): the scalar one is used.
  DivideFn divide[cclNumTypes];
};

// Constant-initialized (no code of an ISA runs before dispatch has checked the CPU for it).
extern const KernelTable kScalarKernels;
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;

// Divide kernels throw InvalidArgument for a zero divisor; defined once, outside the ISA files,
// so that those files pull in no inline library code compiled with their flags.
[[noreturn]] void throw_zero_divisor();

}  // namespace ccl::reduce
