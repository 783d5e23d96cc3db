// reduce_perf: nccl-tests' reduce_perf for ccl (see perf/README.md).
#include "common/harness.h"

int main(int argc, char** argv) {
  return ccl::perf::run_perf_main(argc, argv, ccl::perf::Collective::Reduce);
}
