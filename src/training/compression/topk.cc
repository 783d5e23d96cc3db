// TopK: the k largest |p| as (uint32 index, value) pairs, allgathered, summed into zeros.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "ccl/training/compression.hpp"
#include "ddp/half_cast.h"

namespace ccl::training {

namespace {
size_t value_bytes(bool fp16) { return fp16 ? sizeof(uint16_t) : sizeof(float); }
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
  // First the k-th largest magnitude, the threshold: estimated from an evenly spaced sample (a
  // loose estimate, twice the sample's share), then exact among the elements at or above it
  // (about 2k of them), by nth_element on plain floats. If the estimate keeps fewer than k, the
  // exact selection runs over all d. Then one ascending scan takes the elements above the
  // threshold and the lowest-indexed ties.
  magnitudes_.resize(d);
  for (size_t i = 0; i < d; ++i) magnitudes_[i] = std::fabs(p[i]);
  std::vector<float>& pool = selection_;
  auto kth_largest = [&](std::vector<float>& values, size_t rank) {
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(rank),
                     values.end(), std::greater<float>());
    return values[rank];
  };
  const size_t samples = std::min<size_t>(d, 16384);
  pool.clear();
  for (size_t s = 0; s < samples; ++s) pool.push_back(magnitudes_[s * d / samples]);
  const size_t loose = std::min(samples - 1, (2 * k * samples + d - 1) / d);
  const float estimate = kth_largest(pool, loose);
  pool.clear();
  for (size_t i = 0; i < d; ++i) {
    if (magnitudes_[i] >= estimate) pool.push_back(magnitudes_[i]);
  }
  if (pool.size() < k) pool.assign(magnitudes_.begin(), magnitudes_.end());
  const float threshold = kth_largest(pool, k - 1);
  size_t above = 0;  // how many are strictly larger: all of them are in, then ties by index
  for (size_t i = 0; i < d; ++i) above += magnitudes_[i] > threshold ? 1 : 0;
  size_t ties = k - above;
  std::vector<uint32_t>& index = indices_;
  index.clear();
  for (size_t i = 0; i < d && index.size() < k; ++i) {
    if (magnitudes_[i] > threshold || (magnitudes_[i] == threshold && ties > 0)) {
      if (!(magnitudes_[i] > threshold)) --ties;
      index.push_back(static_cast<uint32_t>(i));
    }
  }

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
      const uint16_t h = half_cast::fp16_from_float(sent);
      std::memcpy(values + j * vbytes, &h, sizeof h);
      sent = half_cast::float_from_fp16(h);
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
  // Summed straight into `out` (the caller's memory, already touched): no scratch to fault in.
  std::fill(out.begin(), out.end(), 0.0f);
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
        uint16_t h = 0;
        std::memcpy(&h, values + j * vbytes, sizeof h);
        v = half_cast::float_from_fp16(h);
      } else {
        std::memcpy(&v, values + j * vbytes, sizeof v);
      }
      out[i] += v;
    }
  }
  const float inv = 1.0f / static_cast<float>(comm.size());
  for (float& x : out) x *= inv;
  return 0;
}

}  // namespace ccl::training
