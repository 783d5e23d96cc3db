// The host-staged path for CUDA device buffers: a collective whose buffers are device memory runs
// on pinned host copies of them (device -> host before, host -> device after, on a CUDA stream
// of ccl's own), through the same algorithms and transports as host memory. It is the path that
// works between any two ranks (shm, tcp, ucx, ib); CUDA IPC between the ranks of one host is the
// faster one where it applies.
//
// Ordering: the device -> host copy runs on a blocking stream, so it waits for the work queued
// before it on CUDA's legacy default stream (NCCL's order for the NULL stream); a ccl stream made
// by cclStreamFromCuda first waits for its CUDA stream (core/cuda_stream_order.h). The call
// returns, or its stream item ends, once the host -> device copy is done.
//
// Where there is no CUDA driver, every buffer is host memory and stage() is one branch.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <utility>

#include "cuda/cuda_memory.h"

namespace ccl {

// A buffer of a call as the operation reads (input) or writes (output) it.
struct CallBuffer {
  const void* data = nullptr;
  size_t bytes = 0;  // 0: the operation does not touch it on this rank
};

// One buffer of a group of sends and receives.
struct StagedBuffer {
  std::byte* data = nullptr;
  size_t bytes = 0;
  bool read = true;  // a send's buffer (copied in); a receive's is copied out
};

class DeviceStaging {
 public:
  // Runs `run(input, output)` with `input` and `output` themselves when neither is device
  // memory (no std::function, no allocation: the blocking host path pays two pointer checks),
  // else with pinned host copies that keep in-place calls in place (the input inside the output,
  // as allgather's; the output inside the input, as reduce-scatter's), the output copied back
  // once `run` returns. If `run` throws, the device output is left as it was. Not thread-safe:
  // the communicator calls it under its op mutex.
  template <class Run>
  void stage(const char* function, CallBuffer input, CallBuffer output, Run&& run) {
    const bool device_in = is_device(input);
    const bool device_out = is_device(output);
    if (!device_in && !device_out) {
      run(input.data, const_cast<void*>(output.data));
      return;
    }
    stage_device(function, input, output, device_in, device_out, std::forward<Run>(run));
  }
  // An elementwise collective (allreduce, reduce, broadcast: element i of the output depends on
  // element i of the inputs only) cut into chunks of `chunk_bytes`: `run(in, out, offset,
  // count)` runs the collective on one chunk (elements [offset, offset + count) of the call),
  // and while it does, the next chunk's input is copied to the host and the last chunk's output
  // back to the device (pinned slots, two CUDA streams of ccl's own), so that the copies hide
  // behind the network. Every rank of the call must cut it the same way, whatever its buffers
  // (the communicator decides for all: staging_chunks_); a rank whose buffers are host memory
  // runs the chunks on them directly. `input` or `output` of 0 bytes: the rank has none.
  void stage_chunks(
      const char* function, CallBuffer input, CallBuffer output, size_t elem_size, size_t count,
      size_t chunk_bytes,
      const std::function<void(const void* in, void* out, size_t offset, size_t count)>& run);
  // The same for a group's sends and receives: `run` gets one host pointer per buffer (the
  // buffer itself where it is host memory). Buffers may not overlap (a group's may not either).
  void stage_each(const char* function, std::span<const StagedBuffer> buffers,
                  const std::function<void(std::span<std::byte* const> host)>& run);

 private:
  static bool is_device(CallBuffer b) {
    return b.bytes > 0 && cuda::pointer_kind(b.data) == MemoryKind::CudaDevice;
  }
  void stage_device(const char* function, CallBuffer input, CallBuffer output, bool device_in,
                    bool device_out, const std::function<void(const void*, void*)>& run);

  cuda::PinnedBuffer host_in_;
  cuda::PinnedBuffer host_out_;
  cuda::PinnedBuffer host_group_;
  cuda::OwnStream stream_;
  // stage_chunks: three slots each way, the copies in and out on streams of their own.
  static constexpr int kSlots = 3;
  cuda::PinnedBuffer chunk_in_[kSlots];
  cuda::PinnedBuffer chunk_out_[kSlots];
  cuda::OwnStream copy_in_;
  cuda::OwnStream copy_out_;
};

}  // namespace ccl
