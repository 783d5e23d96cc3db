// AVX-512 (F, BW, VL, DQ) kernels: simd_kernels.inc at 64 bytes a vector. Compiled with the
// AVX-512 flags (see CMakeLists.txt); reached only after dispatch.cc has checked the CPU.
#define CCL_SIMD_BYTES 64
#include "algorithms/reduce/simd_kernels.inc"

namespace ccl::reduce {
constinit const KernelTable kAvx512Kernels = make_simd_table();
}  // namespace ccl::reduce
