// What the shim asks CUDA's driver directly, through the libcuda.so.1 the program has loaded
// already (dlopen with RTLD_NOLOAD: the shim never loads CUDA into a program that has none, so a
// host-only NCCL program stays host-only). Everything ccl itself does with CUDA goes through
// ccl's C API (cclStreamFromCuda, device buffers); these are the few things NCCL's ABI has and
// ccl's API does not.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ccl_nccl::cuda_probe {

// The device of the calling thread's current context; false where there is none (no driver
// loaded, or no context current).
bool current_device(int* device);

// A CUDA stream's identity for the stream cache: its driver id (cuStreamGetId, unique for the
// process's lifetime, so a stream created where a destroyed one was is not mistaken for it), or 0
// where the driver cannot tell.
uint64_t stream_id(void* stream);

// ncclMemAlloc's device memory on the current context (cuMemAlloc); nullptr where there is no
// current context or the driver refuses (then *error names why).
void* device_alloc(size_t size, const char** error);
// Frees what device_alloc returned; false for any other pointer.
bool device_free(void* pointer);

}  // namespace ccl_nccl::cuda_probe
