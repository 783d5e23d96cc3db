#include "core/device/device_staging.h"

#include <cstdint>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "cuda/stream_ops.h"

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

void DeviceStaging::stage_chunks(
    const char* function, CallBuffer input, CallBuffer output, size_t elem_size, size_t count,
    size_t chunk_bytes, const std::function<void(const void*, void*, size_t, size_t)>& run) {
  const size_t chunk = std::max<size_t>(chunk_bytes / elem_size, 1);
  const bool device_in = is_device(input);
  const bool device_out = is_device(output);
  const auto* in = static_cast<const std::byte*>(input.data);
  auto* out = static_cast<std::byte*>(const_cast<void*>(output.data));
  if (!device_in && !device_out) {
    for (size_t lo = 0; lo < count; lo += chunk) {
      run(input.bytes ? in + lo * elem_size : nullptr,
          output.bytes ? out + lo * elem_size : nullptr, lo, std::min(chunk, count - lo));
    }
    return;
  }
  void* context = cuda::context_of(device_out ? output.data : input.data);
  cuda::ContextScope scope(context);
  cuda::order_after_legacy_stream();  // ccl's copy streams are non-blocking (cuda_memory.h)
  void* in_stream = copy_in_.get(context);
  void* out_stream = copy_out_.get(context);
  const size_t chunks = (count + chunk - 1) / chunk;
  const size_t slot_bytes = chunk * elem_size;
  cuda::Event copied_in[kSlots], copied_out[kSlots];
  bool out_pending[kSlots] = {};
  auto piece = [&](size_t k) { return std::min(chunk, count - k * chunk); };
  // Chunk k's input on the host: in place for host memory, else copied into slot k % 3.
  auto fetch = [&](size_t k) {
    if (!device_in) return;
    const int s = static_cast<int>(k % kSlots);
    cuda::copy_on(in_stream, chunk_in_[s].reserve(slot_bytes), in + k * slot_bytes,
                  piece(k) * elem_size);
    copied_in[s].record(in_stream);
  };
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(config_int("CCL_TIMEOUT"));
  for (size_t k = 0; k < std::min<size_t>(chunks, 2); ++k) fetch(k);
  for (size_t k = 0; k < chunks; ++k) {
    const int s = static_cast<int>(k % kSlots);
    const std::byte* host_in = input.bytes ? in + k * slot_bytes : nullptr;
    if (device_in) {
      copied_in[s].wait(deadline);
      host_in = chunk_in_[s].data();
    }
    if (k + 2 < chunks) fetch(k + 2);  // its slot's last reader (chunk k - 1) is done
    std::byte* host_out = output.bytes ? out + k * slot_bytes : nullptr;
    if (device_out) {
      if (out_pending[s]) copied_out[s].wait(deadline);  // chunk k - 3's copy back
      host_out = chunk_out_[s].reserve(slot_bytes);
    }
    run(host_in, host_out, k * chunk, piece(k));
    if (device_out) {
      cuda::copy_on(out_stream, out + k * slot_bytes, host_out, piece(k) * elem_size);
      copied_out[s].record(out_stream);
      out_pending[s] = true;
    }
  }
  for (int s = 0; s < kSlots; ++s) {
    if (out_pending[s]) copied_out[s].wait(deadline);
  }
  CCL_TRACE(kColl, "%s: %zu chunks of %zu B staged through pinned host memory", function, chunks,
            slot_bytes);
}

}  // namespace ccl
