#include "nccl_shim/stream_map.h"

#include <map>
#include <mutex>
#include <utility>

#include "nccl_shim/cuda_probe.h"
#include "nccl_shim/shim.h"

namespace ccl_nccl {

namespace {

// A stream's address with its driver id: an address alone may come back for a new stream after
// cudaStreamDestroy, and the old ccl stream would order work on the destroyed one.
using StreamKey = std::pair<void*, uint64_t>;

std::mutex streams_mutex;
std::map<StreamKey, cclStream_t> streams;  // never freed: a CUDA stream's end is not seen here

}  // namespace

ncclResult_t ccl_stream_for(cudaStream_t stream, cclStream_t* out) {
  *out = nullptr;
  int device = 0;
  if (stream == nullptr && !cuda_probe::current_device(&device)) return ncclSuccess;
  const StreamKey key{stream, cuda_probe::stream_id(stream)};
  std::lock_guard lock(streams_mutex);
  if (auto it = streams.find(key); it != streams.end()) {
    *out = it->second;
    return ncclSuccess;
  }
  cclStream_t made = nullptr;
  if (const cclResult_t result = cclStreamFromCuda(stream, &made); result != cclSuccess) {
    return fail(from_ccl(result), "%s", cclGetLastError(nullptr));  // this thread's: why
  }
  streams.emplace(key, made);
  *out = made;
  return ncclSuccess;
}

}  // namespace ccl_nccl
