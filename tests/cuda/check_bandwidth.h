// The bandwidth part of tests/cuda/cuda_kernels_check: every kernel at 256 MiB against
// cudaMemcpy device to device, in GB/s of bytes read plus bytes written.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "algorithms/reduce/reduce.h"
#include "check_data.h"
#include "check_gpu.h"

namespace ccl::cuda_check {

inline constexpr size_t kBandwidthBytes = size_t(256) << 20;

// Mean seconds of `iters` runs of fn after one warm-up, timed with events.
template <class Fn>
double time_it(Fn fn, int iters = 10) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  fn();
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) fn();
  check(cudaEventRecord(stop), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / iters;
}

// GB/s counts every byte read and written (a reduce moves 3 x 256 MiB, a copy 2 x 256 MiB).
inline void bandwidth(Gpu& g) {
  unsigned char* buf[3];
  for (auto& p : buf) {
    check(cudaMalloc(&p, kBandwidthBytes), "cudaMalloc 256 MiB");
    check(cudaMemset(p, 0x31, kBandwidthBytes), "cudaMemset");  // small normal values
  }
  const double memcpy_s = time_it([&] {
    check(cudaMemcpyAsync(buf[2], buf[0], kBandwidthBytes, cudaMemcpyDeviceToDevice), "memcpy");
  });
  const double memcpy_gbs = 2.0 * kBandwidthBytes / memcpy_s / 1e9;
  std::printf("bandwidth at 256 MiB (bytes read + written): cudaMemcpy D2D %.1f GB/s\n",
              memcpy_gbs);
  auto report = [&](const char* name, double moved, double seconds) {
    const double gbs = moved / seconds / 1e9;
    std::printf("  %-22s %8.1f GB/s  %.2fx memcpy\n", name, gbs, gbs / memcpy_gbs);
  };
  auto time_kernel = [&](const char* name, u64 count, size_t size, auto... args) {
    cudaKernel_t k = g.kernel(name);
    void* params[] = {&args...};
    const dim3 grid(rc::grid_blocks(count, size, g.sm_count)), block(rc::kThreadsPerBlock);
    return time_it([&] {
      check(cudaLaunchKernel(reinterpret_cast<const void*>(k), grid, block, params, 0, nullptr),
            name);
    });
  };
  const double bytes = double(kBandwidthBytes);
  for (int t = 0; t < cclNumTypes; ++t) {
    const auto type = static_cast<cclDataType_t>(t);
    const size_t size = reduce::datatype_size(type);
    const u64 n = kBandwidthBytes / size;
    for (int op = 0; op < rc::kNumBaseOps; ++op) {
      const char* name = rc::reduce_kernel_name(type, static_cast<cclRedOp_t>(op));
      report(name, 3 * bytes,
             time_kernel(name, n, size, static_cast<void*>(buf[2]),
                         static_cast<const void*>(buf[0]), static_cast<const void*>(buf[1]), n));
    }
    const char* div = rc::divide_kernel_name(type);
    report(div, 2 * bytes, time_kernel(div, n, size, static_cast<void*>(buf[2]), n, u64(3)));
    const char* scale = rc::scale_kernel_name(type);
    report(
        scale, 2 * bytes,
        time_kernel(scale, n, size, static_cast<void*>(buf[2]), static_cast<const void*>(buf[0]), n,
                    u64(specials(type)[6])));  // 1.0 for floats
  }
  report("ccl_copy", 2 * bytes,
         time_kernel("ccl_copy", u64(kBandwidthBytes), 1, static_cast<void*>(buf[2]),
                     static_cast<const void*>(buf[0]), u64(kBandwidthBytes)));
  for (auto* p : buf) cudaFree(p);
}

}  // namespace ccl::cuda_check
