// The CUDA driver, loaded at run time (dlopen "libcuda.so.1", then cuGetProcAddress for each
// entry point), so that libccl neither links nor needs CUDA: where there is no driver, or no
// device, or the build had no CUDA headers, cuda_driver() is nullptr and ccl behaves exactly as a
// host-only library (no buffer is ever taken for device memory).
//
// CCL_CUDA=0 keeps the driver unloaded even where it exists (a host-only job on a GPU machine then
// pays no cuInit and no pointer queries). Tests install a fake driver (set_cuda_driver_for_testing)
// with the same table.
#pragma once

#include <string>

namespace ccl::cuda {

struct DriverApi;  // cuda_driver_api.h: the table of entry points (needs cuda.h)

// The loaded driver, or nullptr. The first call loads it (thread-safe) and calls cuInit(0).
const DriverApi* cuda_driver();
// Why cuda_driver() is nullptr ("no libcuda.so.1: ...", "CCL_CUDA=0", "this build of ccl has no
// CUDA support"), or "" when it is not.
std::string cuda_unavailable_reason();

// Throws cclInvalidUsage "<what>: no CUDA driver (<cuda_unavailable_reason()>)": what every
// call that needs the driver does where there is none.
[[noreturn]] void throw_no_driver(const char* what);

// Replaces the driver for this process (nullptr: back to "no driver"), for tests. Not thread-safe
// against calls in flight: install before the first communicator.
void set_cuda_driver_for_testing(const DriverApi* api);

}  // namespace ccl::cuda
