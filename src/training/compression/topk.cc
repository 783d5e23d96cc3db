// TopK: the k largest |p| as (uint32 index, value) pairs, allgathered, summed into zeros.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "ccl/training/compression.hpp"

namespace ccl::training {

namespace {
size_t value_bytes(bool fp16) { return fp16 ? sizeof(_Float16) : sizeof(float); }
}  // namespace

TopK::TopK(TopKOptions options) : options_(options) {
  if (!(options.ratio > 0.0 && options.ratio <= 1.0)) {
    throw std::invalid_argument("ccl::training::TopK: ratio " + std::to_string(options.ratio) +
                                " is not in (0, 1]");
  }
}

std::string TopK::name() const {
  return std::string(options_.fp16_values ? "topk16:" : "topk:") + std::to_string(options_.ratio);
}

size_t TopK::k_for(size_t count) const {
  if (count == 0) return 0;
  const auto k = static_cast<size_t>(std::llround(options_.ratio * static_cast<double>(count)));
  return std::clamp<size_t>(k, 1, count);
}

uint64_t TopK::compress_and_queue(ccl::Communicator& comm, size_t, std::span<float> p,
                                  std::span<float> error, Pending& pending, ccl::StreamRef stream) {
  const size_t d = p.size();
  if (d > UINT32_MAX) throw std::invalid_argument("ccl::training::TopK: more than 2^32 elements");
  const size_t k = k_for(d);
  // The k largest magnitudes, ties to the lower index, so that every run selects the same set.
  std::vector<uint32_t> index(d);
  std::iota(index.begin(), index.end(), 0u);
  auto larger = [&](uint32_t a, uint32_t b) {
    const float fa = std::fabs(p[a]), fb = std::fabs(p[b]);
    return fa > fb || (fa == fb && a < b);
  };
  std::nth_element(index.begin(), index.begin() + static_cast<std::ptrdiff_t>(k), index.end(),
                   larger);
  index.resize(k);
  std::sort(index.begin(), index.end());  // ascending indices: the scatter walks memory forward

  const size_t vbytes = value_bytes(options_.fp16_values);
  const size_t message = k * (sizeof(uint32_t) + vbytes);
  pending.send.resize(message);
  pending.recv.resize(message * static_cast<size_t>(comm.size()));
  std::memcpy(pending.send.data(), index.data(), k * sizeof(uint32_t));
  uint8_t* values = pending.send.data() + k * sizeof(uint32_t);
  if (!error.empty()) std::copy(p.begin(), p.end(), error.begin());
  for (size_t j = 0; j < k; ++j) {
    // Δ is what travels (rounded to fp16 when it does), so e' = p − Δ keeps the rounding too.
    float sent = p[index[j]];
    if (options_.fp16_values) {
      const auto h = static_cast<_Float16>(sent);
      std::memcpy(values + j * vbytes, &h, sizeof h);
      sent = static_cast<float>(h);
    } else {
      std::memcpy(values + j * vbytes, &sent, sizeof sent);
    }
    if (!error.empty()) error[index[j]] -= sent;
  }
  comm.all_gather(std::span<const uint8_t>(pending.send), std::span<uint8_t>(pending.recv), stream);
  return message;
}

uint64_t TopK::decompress(ccl::Communicator& comm, size_t, Pending& pending, std::span<float> out) {
  const size_t k = k_for(pending.count);
  const size_t vbytes = value_bytes(options_.fp16_values);
  const size_t message = k * (sizeof(uint32_t) + vbytes);
  std::vector<float> sum(out.size(), 0.0f);
  for (int r = 0; r < comm.size(); ++r) {
    const uint8_t* m = pending.recv.data() + static_cast<size_t>(r) * message;
    const uint8_t* values = m + k * sizeof(uint32_t);
    for (size_t j = 0; j < k; ++j) {
      uint32_t i = 0;
      std::memcpy(&i, m + j * sizeof(uint32_t), sizeof i);
      if (i >= out.size()) {
        throw std::runtime_error("ccl::training::TopK: rank " + std::to_string(r) + " sent index " +
                                 std::to_string(i) + " of " + std::to_string(out.size()) +
                                 " elements (ranks disagree)");
      }
      float v = 0;
      if (options_.fp16_values) {
        _Float16 h;
        std::memcpy(&h, values + j * vbytes, sizeof h);
        v = static_cast<float>(h);
      } else {
        std::memcpy(&v, values + j * vbytes, sizeof v);
      }
      sum[i] += v;
    }
  }
  const float inv = 1.0f / static_cast<float>(comm.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = sum[i] * inv;
  return 0;
}

}  // namespace ccl::training
