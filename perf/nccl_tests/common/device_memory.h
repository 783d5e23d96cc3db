// Device buffers for `--memory device`: what nccl-tests always uses (cudaMalloc on the rank's GPU,
// a CUDA stream) through the CUDA runtime, linked statically where the toolkit is found. The
// runtime loads the driver only at its first call, so host runs (the default) never touch CUDA.
// Every function throws std::runtime_error naming the call and CUDA's reason.
#pragma once

#include <cstddef>
#include <string>

struct CUstream_st;

namespace ccl::perf::device {

// Empty when device buffers can be used here, else why not (no toolkit at build time, no driver,
// no device).
std::string unavailable_reason();

// Makes GPU (local_rank mod the GPUs this process sees) current; returns its ordinal.
int select_for(int local_rank);

void* alloc(size_t bytes);  // zeroed
void release(void* p);      // noexcept in effect: errors are ignored at teardown
void to_device(void* dst, const void* src, size_t bytes);
void to_host(void* dst, const void* src, size_t bytes);
size_t free_bytes();  // free memory of the current GPU

CUstream_st* create_stream();
void destroy_stream(CUstream_st* stream);

}  // namespace ccl::perf::device
