// ccl's reduction kernels (src/algorithms/reduce/cuda) on a device: the embedded fatbin loaded
// into a context on first use (cuModuleLoadData), its functions looked up once, and launched on
// a stream with the geometry of cuda_launch.h. Free of CUDA types (contexts and streams are
// opaque pointers), as cuda_memory.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "ccl/ccl.h"

namespace ccl::cuda {

// Whether this build embeds the kernels (nvcc was found at configure time:
// CCL_HAVE_CUDA_KERNELS). Without them the device path stages through host memory only.
bool have_kernels();

class DeviceKernels {
 public:
  DeviceKernels() = default;
  DeviceKernels(const DeviceKernels&) = delete;
  DeviceKernels& operator=(const DeviceKernels&) = delete;

  // dst[i] = a[i] op b[i] for `count` elements, queued on `stream` of `context` (current on
  // this thread). `op` is a base op or cclAvg (which reduces as a sum: divide() afterwards).
  // dst may be a or b. Throws cclInvalidArgument for an op without a kernel (PreMulSum) and
  // cclUnhandledCudaError when the driver refuses the load or the launch.
  void reduce(void* context, void* stream, void* dst, const void* a, const void* b, size_t count,
              cclDataType_t type, cclRedOp_t op);
  // data[i] /= divisor (divisor > 0), as the CPU's DivideFn.
  void divide(void* context, void* stream, void* data, size_t count, cclDataType_t type,
              uint64_t divisor);
  // dst[i] = src[i] * scalar (PreMulSum), the scalar's element bits in the low bytes of
  // `scalar_bits`, as the CPU's ScaleFn reads them.
  void scale(void* context, void* stream, void* dst, const void* src, size_t count,
             cclDataType_t type, uint64_t scalar_bits);

 private:
  // The function at kernel_name_at(index) in `context`, loading the module there first.
  void* function(void* context, int index);
  void launch(void* context, void* stream, int index, size_t count, size_t elem_size,
              void** params);

  void* context_ = nullptr;
  void* module_ = nullptr;
  int sm_count_ = 0;
  std::array<void*, reduce::cuda::kNumKernels> functions_{};
};

}  // namespace ccl::cuda
