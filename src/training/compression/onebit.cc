// DeepSpeed's compressed allreduce (1-bit Adam): worker signs through alltoall, a server stage per
// chunk with its own error feedback, server signs through allgather.
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ccl/training/compression.hpp"
#include "compression/sign_bits.h"

namespace ccl::training {

namespace {

// d padded to a multiple of 8·n, so every rank's chunk is a whole number of bytes of signs.
size_t padded(size_t d, int n) {
  const size_t unit = 8 * static_cast<size_t>(n);
  return (d + unit - 1) / unit * unit;
}

// ‖x‖₂/√len: the scale that keeps the L2 norm of scale·sign(x) equal to x's.
float rms_scale(std::span<const float> x) {
  double sq = 0;
  for (const float v : x) sq += static_cast<double>(v) * v;
  return x.empty() ? 0.0f : static_cast<float>(std::sqrt(sq / static_cast<double>(x.size())));
}

}  // namespace

std::span<const float> OneBit::server_error(size_t key) const {
  auto it = server_errors_.find(key);
  return it == server_errors_.end() ? std::span<const float>() : std::span<const float>(it->second);
}

void OneBit::forget() {
  Compressor::forget();
  server_errors_.clear();
}

uint64_t OneBit::compress_and_queue(ccl::Communicator& comm, size_t, std::span<float> p,
                                    std::span<float> error, Pending& pending,
                                    ccl::StreamRef stream) {
  const int n = comm.size();
  const size_t d = p.size(), dp = padded(d, n);
  // The padding is zeros on every rank: its signs are +, its errors stay 0 and are not kept.
  std::vector<float>& full = full_;
  full.assign(dp, 0.0f);
  std::copy(p.begin(), p.end(), full.begin());
  const float scale = rms_scale(full);
  for (size_t i = 0; i < error.size(); ++i) error[i] = p[i] - (p[i] >= 0.0f ? scale : -scale);
  // send: the packed signs, chunk j (dp/(8n) bytes) for rank j; send2: this rank's scale.
  pending.send.resize(dp / 8);
  sign_bits::pack(full, pending.send.data());
  pending.recv.resize(dp / 8);
  pending.send2.resize(sizeof(float));
  std::memcpy(pending.send2.data(), &scale, sizeof scale);
  pending.recv2.resize(sizeof(float) * static_cast<size_t>(n));
  comm.all_to_all(std::span<const uint8_t>(pending.send), std::span<uint8_t>(pending.recv), stream);
  comm.all_gather(std::span<const uint8_t>(pending.send2), std::span<uint8_t>(pending.recv2),
                  stream);
  return pending.send.size() + pending.send2.size();
}

uint64_t OneBit::decompress(ccl::Communicator& comm, size_t key, Pending& pending,
                            std::span<float> out) {
  const int n = comm.size();
  const size_t dp = padded(pending.count, n), chunk = dp / static_cast<size_t>(n);
  const size_t chunk_bytes = chunk / 8;
  // Server stage for this rank's chunk: average the workers' scale·sign, add the server error.
  std::vector<float>& q = q_;
  q.assign(chunk, 0.0f);
  for (int j = 0; j < n; ++j) {
    float s = 0;
    std::memcpy(&s, pending.recv2.data() + static_cast<size_t>(j) * sizeof(float), sizeof s);
    sign_bits::add_scaled(pending.recv.data() + static_cast<size_t>(j) * chunk_bytes,
                          s / static_cast<float>(n), q);
  }
  std::vector<float>& es = server_errors_[key];
  if (es.size() != chunk) es.assign(chunk, 0.0f);
  for (size_t i = 0; i < chunk; ++i) q[i] += es[i];
  const float server_scale = rms_scale(q);
  for (size_t i = 0; i < chunk; ++i) {
    es[i] = error_feedback() ? q[i] - (q[i] >= 0.0f ? server_scale : -server_scale) : 0.0f;
  }
  // Every rank's server result: packed signs and scale, allgathered (blocking: finish runs after
  // the stream's stage 1 completed, nothing else of this compressor is queued).
  std::vector<uint8_t>& send = server_send_;
  send.resize(chunk_bytes + sizeof(float));
  sign_bits::pack(q, send.data());
  std::memcpy(send.data() + chunk_bytes, &server_scale, sizeof server_scale);
  std::vector<uint8_t>& all = server_all_;
  all.resize(send.size() * static_cast<size_t>(n));
  comm.all_gather(std::span<const uint8_t>(send), std::span<uint8_t>(all));
  std::vector<float>& result = full_;  // the worker stage is done with it
  result.assign(dp, 0.0f);
  for (int j = 0; j < n; ++j) {
    const uint8_t* m = all.data() + static_cast<size_t>(j) * send.size();
    float s = 0;
    std::memcpy(&s, m + chunk_bytes, sizeof s);
    sign_bits::add_scaled(m, s,
                          std::span<float>(result).subspan(static_cast<size_t>(j) * chunk, chunk));
  }
  std::copy(result.begin(), result.begin() + static_cast<std::ptrdiff_t>(out.size()), out.begin());
  return send.size();
}

}  // namespace ccl::training
