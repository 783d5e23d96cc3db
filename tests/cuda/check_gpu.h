// The GPU side of tests/cuda/cuda_kernels_check: the loaded fatbin, its kernels and their
// launch with the geometry of cuda_launch.h (the one the host side of ccl uses).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "algorithms/reduce/cuda/cuda_launch.h"

namespace ccl::cuda_check {

namespace rc = ccl::reduce::cuda;
using u64 = unsigned long long;

[[noreturn]] inline void die(const char* what, cudaError_t e) {
  std::printf("FAIL: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
  std::exit(1);
}

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(what, e);
}

struct Gpu {
  cudaLibrary_t library = nullptr;
  int sm_count = 0;
  unsigned char* buf[3] = {};  // a, b, dst
  std::vector<std::string> failures;
  u64 cases = 0, elements = 0, nan_elements = 0;
  std::vector<std::string> passed;  // kernel names with every case identical

  cudaKernel_t kernel(const char* name) {
    cudaKernel_t k = nullptr;
    check(cudaLibraryGetKernel(&k, library, name), name);
    return k;
  }

  // Launches with the geometry cuda_launch.h prescribes; args are the kernel's parameters.
  template <class... Args>
  void launch(const char* name, u64 count, size_t elem_size, Args... args) {
    void* params[] = {&args...};
    const dim3 grid(rc::grid_blocks(count, elem_size, sm_count)), block(rc::kThreadsPerBlock);
    check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel(name)), grid, block, params, 0,
                           nullptr),
          name);
    check(cudaDeviceSynchronize(), name);
  }
};

}  // namespace ccl::cuda_check
