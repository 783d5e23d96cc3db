#include "cuda/cuda_kernels.h"

#include "algorithms/reduce/cuda/cuda_launch.h"
#include "algorithms/reduce/reduce.h"
#include "base/error.h"

#if CCL_HAVE_CUDA_H
#include "cuda/cuda_driver_api.h"
#endif
#if CCL_HAVE_CUDA_KERNELS
#include "algorithms/reduce/cuda/cuda_fatbin.h"
#endif

namespace ccl::cuda {

namespace names = reduce::cuda;

bool have_kernels() { return CCL_HAVE_CUDA_KERNELS != 0; }

#if CCL_HAVE_CUDA_H && CCL_HAVE_CUDA_KERNELS

void* DeviceKernels::function(void* context, int index) {
  const DriverApi& api = require_driver("the CUDA kernels");
  if (context != context_) {
    // A new context (the buffers' device changed): the module of the old one stays loaded with
    // it; its functions are not valid here.
    CUmodule module = nullptr;
    check(api, api.module_load_data(&module, ccl_cuda_fatbin), "cuModuleLoadData(ccl kernels)");
    CUdevice device = 0;
    check(api, api.ctx_get_device(&device), "cuCtxGetDevice");
    int sms = 0;
    check(api, api.device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
          "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
    context_ = context;
    module_ = module;
    sm_count_ = sms;
    functions_.fill(nullptr);
  }
  if (functions_[index] == nullptr) {
    CUfunction fn = nullptr;
    check(
        api,
        api.module_get_function(&fn, static_cast<CUmodule>(module_), names::kernel_name_at(index)),
        "cuModuleGetFunction");
    functions_[index] = fn;
  }
  return functions_[index];
}

void DeviceKernels::launch(void* context, void* stream, int index, size_t count, size_t elem_size,
                           void** params) {
  const DriverApi& api = require_driver("the CUDA kernels");
  auto* fn = static_cast<CUfunction>(function(context, index));
  const unsigned blocks = names::grid_blocks(count, elem_size, sm_count_);
  check(api,
        api.launch_kernel(fn, blocks, 1, 1, names::kThreadsPerBlock, 1, 1, 0,
                          static_cast<CUstream>(stream), params, nullptr),
        names::kernel_name_at(index));
}

#else

void* DeviceKernels::function(void*, int) {
  throw Error(cclInvalidUsage, "this build of ccl has no CUDA kernels (nvcc was not found)");
}
void DeviceKernels::launch(void* context, void*, int index, size_t, size_t, void**) {
  function(context, index);
}

#endif

void DeviceKernels::reduce(void* context, void* stream, void* dst, const void* a, const void* b,
                           size_t count, cclDataType_t type, cclRedOp_t op) {
  const int index = names::reduce_kernel_index(type, op);
  if (index < 0) throw Error(cclInvalidArgument, "no CUDA reduce kernel for this type and op");
  unsigned long long n = count;
  void* params[] = {&dst, &a, &b, &n};
  launch(context, stream, index, count, reduce::datatype_size(type), params);
}

void DeviceKernels::divide(void* context, void* stream, void* data, size_t count,
                           cclDataType_t type, uint64_t divisor) {
  const int index = names::divide_kernel_index(type);
  if (index < 0 || divisor == 0) {
    throw Error(cclInvalidArgument, "no CUDA divide kernel for this type, or a divisor of 0");
  }
  unsigned long long n = count, d = divisor;
  void* params[] = {&data, &n, &d};
  launch(context, stream, index, count, reduce::datatype_size(type), params);
}

void DeviceKernels::scale(void* context, void* stream, void* dst, const void* src, size_t count,
                          cclDataType_t type, uint64_t scalar_bits) {
  const int index = names::scale_kernel_index(type);
  if (index < 0) throw Error(cclInvalidArgument, "no CUDA scale kernel for this type");
  unsigned long long n = count, bits = scalar_bits;
  void* params[] = {&dst, &src, &n, &bits};
  launch(context, stream, index, count, reduce::datatype_size(type), params);
}

}  // namespace ccl::cuda
