// The driver shared by the *_perf binaries: joins the communicator started by the launcher
// (cclrun, mpirun, srun, torchrun), sweeps sizes x datatypes x ops x roots, times each operation
// out of place and in place, checks the results, and prints nccl-tests' table (and --json).
#pragma once

#include "sweep.h"

namespace ccl::perf {

// The whole program: returns the process exit status (0 when every check passed).
int run_perf_main(int argc, char** argv, Collective coll);

}  // namespace ccl::perf
