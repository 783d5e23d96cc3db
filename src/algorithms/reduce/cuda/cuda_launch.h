// Launch geometry of the CUDA kernels (kernels.cu). Plain C++: the host side that launches them
// through the driver API includes it without any CUDA header.
//
// Every kernel is a grid-stride loop, so any grid is correct; this geometry is what makes them
// fast. Each thread moves kVectorsPerThread 16-byte vectors of every input per loop iteration
// (all loads issued before the first store, for memory-level parallelism); the grid is capped
// at kBlocksPerSm blocks per SM so that one wave covers the GPU and the loop does the rest.
// The numbers are chosen, not yet measured (no GPU here): 512 x 2 threads per SM keep
// 2 x 64 KiB of loads in flight per SM, several times what H100/H200 need (bandwidth x latency
// per SM is about 25 KiB). tests/cuda/cuda_kernels_check prints the GB/s to tune them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ccl::reduce::cuda {

// blockDim.x of every launch. The kernels are compiled with __launch_bounds__ of this value:
// a larger block fails to launch, a smaller one runs correctly but slower.
inline constexpr unsigned kThreadsPerBlock = 512;
// Blocks per SM the grid is capped at (also the kernels' minimum-blocks launch bound, which
// caps them at 64 registers a thread).
inline constexpr unsigned kBlocksPerSm = 2;
// Bytes of one vector load or store (uint4) and how many of them a thread handles per input
// per loop iteration.
inline constexpr unsigned kVectorBytes = 16;
inline constexpr unsigned kVectorsPerThread = 4;
inline constexpr unsigned kBytesPerThread = kVectorBytes * kVectorsPerThread;  // 64

// Elements of a datatype of elem_size bytes one thread handles per loop iteration.
constexpr unsigned elements_per_thread(size_t elem_size) {
  return elem_size == 0 ? 0 : unsigned(kBytesPerThread / elem_size);
}

// gridDim.x for `count` elements of elem_size bytes (for ccl_copy: count bytes, elem_size 1) on
// a device with sm_count SMs: enough blocks for one iteration per thread, at most
// kBlocksPerSm per SM, at least 1 (a launch of count 0 is valid and does nothing).
constexpr unsigned grid_blocks(unsigned long long count, size_t elem_size, int sm_count) {
  if (elem_size == 0) return 1;
  const unsigned long long per_block = kThreadsPerBlock * elements_per_thread(elem_size);
  const unsigned long long wanted = count / per_block + (count % per_block != 0);
  const unsigned long long cap =
      sm_count > 0 ? static_cast<unsigned long long>(sm_count) * kBlocksPerSm : kBlocksPerSm;
  const unsigned long long blocks = wanted < cap ? wanted : cap;
  return blocks == 0 ? 1 : static_cast<unsigned>(blocks);
}

}  // namespace ccl::reduce::cuda
