#include "device_memory.h"

#include <stdexcept>

#if CCL_PERF_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

namespace ccl::perf::device {

#if CCL_PERF_HAVE_CUDART

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(status));
  }
}

}  // namespace

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(status);
  if (count == 0) return "no CUDA device";
  return "";
}

int select_for(int local_rank) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  const int device = local_rank % count;
  check(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

void* alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  check(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}

void release(void* p) { (void)cudaFree(p); }

void to_device(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (to the device)");
}

void to_host(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (to the host)");
}

size_t free_bytes() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

CUstream_st* create_stream() {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  return stream;
}

void destroy_stream(CUstream_st* stream) { (void)cudaStreamDestroy(stream); }

#else  // built without the CUDA toolkit

namespace {
[[noreturn]] void unavailable() {
  throw std::runtime_error("this build has no CUDA runtime (the CUDA toolkit was not found)");
}
}  // namespace

std::string unavailable_reason() { return "this build has no CUDA runtime (no CUDA toolkit)"; }
int select_for(int) { unavailable(); }
void* alloc(size_t) { unavailable(); }
void release(void*) {}
void to_device(void*, const void*, size_t) { unavailable(); }
void to_host(void*, const void*, size_t) { unavailable(); }
size_t free_bytes() { unavailable(); }
CUstream_st* create_stream() { unavailable(); }
void destroy_stream(CUstream_st*) {}

#endif

}  // namespace ccl::perf::device
