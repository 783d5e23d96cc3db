// NCCL's cudaStream_t argument as a ccl stream. A CUDA stream gets one ccl stream
// (cclStreamFromCuda), made at its first use and kept for the process's lifetime, so that
// operations on one CUDA stream stay in one ccl queue and in order. The default stream (NULL)
// is CUDA's legacy stream where the calling thread has a current CUDA context; without one (a
// host-only program, as NCCL never allows: NVIDIA/nccl#561) it is ccl's NULL stream, and the
// call returns when its operation is complete.
#pragma once

#include <nccl.h>

#include "ccl/ccl.h"

namespace ccl_nccl {

// The ccl stream for `stream`, into *out (nullptr: ccl's NULL stream). ncclSuccess, or ccl's
// error from cclStreamFromCuda (a stream of no usable context) after recording it.
ncclResult_t ccl_stream_for(cudaStream_t stream, cclStream_t* out);

}  // namespace ccl_nccl
