// AVX2 (+F16C, FMA) kernels: simd_kernels.inc at 32 bytes a vector. Compiled with -mavx2 -mfma
// -mf16c (see CMakeLists.txt); reached only after dispatch.cc has checked the CPU.
#define CCL_SIMD_BYTES 32
#include "algorithms/reduce/simd_kernels.inc"

namespace ccl::reduce {
constinit const KernelTable kAvx2Kernels = make_simd_table();
}  // namespace ccl::reduce
