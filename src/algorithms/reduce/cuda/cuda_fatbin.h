// The CUDA kernels of kernels.cu as one fatbin image (sm_80 and sm_90 SASS, compute_90 PTX for
// later GPUs to JIT), embedded by the ccl_cuda_kernels object library (cmake/cuda_kernels.cmake)
// where nvcc was found at configure time (CCL_HAVE_CUDA_KERNELS). Load it with cuLibraryLoadData
// / cuModuleLoadData (driver API) or cudaLibraryLoadData (runtime API); kernel names and launch
// geometry: cuda_kernel_names.h and cuda_launch.h.
#pragma once

extern "C" {
// 8-byte aligned, as the loaders expect of a fatbin.
extern const unsigned char ccl_cuda_fatbin[];
extern const unsigned long long ccl_cuda_fatbin_size;
}
