#include "algorithms/memory_kernels.h"

#include <cstring>

namespace ccl::algo {

namespace {

void host_copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}
void host_move(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
}

// Registered host memory is host memory the other ranks can also map: the same kernels.
constexpr MemoryKernels kHost{
    MemoryKind::Host,      host_copy,           host_move, reduce::reduce_kernel,
    reduce::divide_kernel, reduce::scale_kernel};
constexpr MemoryKernels kRegisteredHost{
    MemoryKind::RegisteredHost, host_copy,           host_move, reduce::reduce_kernel,
    reduce::divide_kernel,      reduce::scale_kernel};

}  // namespace

const MemoryKernels* kernels_for(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host:
      return &kHost;
    case MemoryKind::RegisteredHost:
      return &kRegisteredHost;
    case MemoryKind::CudaDevice:
      return nullptr;
  }
  return nullptr;
}

const MemoryKernels* kernels_for(MemoryKind a, MemoryKind b) {
  if (is_host_memory(a) && is_host_memory(b)) return a == b ? kernels_for(a) : &kHost;
  return a == b ? kernels_for(a) : nullptr;
}

}  // namespace ccl::algo
