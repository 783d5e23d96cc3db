#include "core/device_staging.h"

#include <cstdint>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace ccl {
namespace {

bool inside(const std::byte* p, size_t bytes, const std::byte* outer, size_t outer_bytes) {
  return p >= outer && p + bytes <= outer + outer_bytes;
}

}  // namespace

void DeviceStaging::stage_device(const char* function, CallBuffer input, CallBuffer output,
                                 bool device_in, bool device_out,
                                 const std::function<void(const void*, void*)>& run) {
  void* context = cuda::context_of(device_out ? output.data : input.data);
  cuda::ContextScope scope(context);
  cuda::order_after_legacy_stream();  // ccl's copy stream is non-blocking (cuda_memory.h)
  const auto* in = static_cast<const std::byte*>(input.data);
  auto* out = static_cast<std::byte*>(const_cast<void*>(output.data));

  const void* host_in = input.data;
  std::byte* host_out = out;
  if (device_in && device_out && inside(in, input.bytes, out, output.bytes)) {
    // In place, the input a part of the output (allgather, or allreduce with send == recv).
    host_out = host_out_.reserve(output.bytes);
    stream_.copy(context, host_out, out, output.bytes);
    host_in = host_out + (in - out);
  } else if (device_in && device_out && inside(out, output.bytes, in, input.bytes)) {
    // In place, the output a part of the input (reduce-scatter's recvbuff = sendbuff + offset).
    std::byte* staged = host_in_.reserve(input.bytes);
    stream_.copy(context, staged, in, input.bytes);
    host_in = staged;
    host_out = staged + (out - in);
  } else {
    if (device_in) {
      std::byte* staged = host_in_.reserve(input.bytes);
      stream_.copy(context, staged, in, input.bytes);
      host_in = staged;
    }
    // Not copied in: every operation writes the whole of its output.
    if (device_out) host_out = host_out_.reserve(output.bytes);
  }
  CCL_TRACE(kColl, "%s: staged through pinned host memory (%zu B in%s, %zu B out%s)", function,
            input.bytes, device_in ? " from the device" : "", output.bytes,
            device_out ? " to the device" : "");
  run(host_in, host_out);
  if (device_out) stream_.copy(context, out, host_out, output.bytes);
}

void DeviceStaging::stage_each(const char* function, std::span<const StagedBuffer> buffers,
                               const std::function<void(std::span<std::byte* const>)>& run) {
  std::vector<std::byte*> host(buffers.size());
  std::vector<size_t> offsets(buffers.size(), SIZE_MAX);  // SIZE_MAX: host memory, used as is
  size_t total = 0;
  const void* first_device = nullptr;
  for (size_t i = 0; i < buffers.size(); ++i) {
    host[i] = buffers[i].data;
    if (buffers[i].bytes == 0 || cuda::pointer_kind(buffers[i].data) != MemoryKind::CudaDevice) {
      continue;
    }
    if (first_device == nullptr) first_device = buffers[i].data;
    offsets[i] = total;
    total += (buffers[i].bytes + 63) / 64 * 64;  // each slice on its own cache lines
  }
  if (first_device == nullptr) {
    run(host);
    return;
  }
  void* context = cuda::context_of(first_device);
  cuda::ContextScope scope(context);
  cuda::order_after_legacy_stream();
  std::byte* block = host_group_.reserve(total);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (offsets[i] == SIZE_MAX) continue;
    host[i] = block + offsets[i];
    if (buffers[i].read) stream_.copy(context, host[i], buffers[i].data, buffers[i].bytes);
  }
  CCL_TRACE(kColl, "%s: %zu B of device buffers staged through pinned host memory", function,
            total);
  run(host);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (offsets[i] != SIZE_MAX && !buffers[i].read) {
      stream_.copy(context, buffers[i].data, host[i], buffers[i].bytes);
    }
  }
}

}  // namespace ccl
