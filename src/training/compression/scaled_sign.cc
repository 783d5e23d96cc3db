// Scaled sign: Δ = ‖p‖₁/d · sign(p) as (float scale, packed bits), allgathered and averaged.
#include <cmath>
#include <cstring>

#include "ccl/training/compression.hpp"
#include "compression/sign_bits.h"

namespace ccl::training {

uint64_t ScaledSign::compress_and_queue(ccl::Communicator& comm, size_t, std::span<float> p,
                                        std::span<float> error, Pending& pending,
                                        ccl::StreamRef stream) {
  const size_t d = p.size();
  double l1 = 0;
  for (const float x : p) l1 += std::fabs(x);
  const float scale = d == 0 ? 0.0f : static_cast<float>(l1 / static_cast<double>(d));
  const size_t message = sizeof(float) + sign_bits::bytes_for(d);
  pending.send.resize(message);
  pending.recv.resize(message * static_cast<size_t>(comm.size()));
  std::memcpy(pending.send.data(), &scale, sizeof scale);
  sign_bits::pack(p, pending.send.data() + sizeof(float));
  for (size_t i = 0; i < error.size(); ++i) error[i] = p[i] - (p[i] >= 0.0f ? scale : -scale);
  comm.all_gather(std::span<const uint8_t>(pending.send), std::span<uint8_t>(pending.recv), stream);
  return message;
}

uint64_t ScaledSign::decompress(ccl::Communicator& comm, size_t, Pending& pending,
                                std::span<float> out) {
  const size_t message = sizeof(float) + sign_bits::bytes_for(pending.count);
  std::fill(out.begin(), out.end(), 0.0f);
  const float inv = 1.0f / static_cast<float>(comm.size());
  for (int r = 0; r < comm.size(); ++r) {
    const uint8_t* m = pending.recv.data() + static_cast<size_t>(r) * message;
    float scale = 0;
    std::memcpy(&scale, m, sizeof scale);
    sign_bits::add_scaled(m + sizeof(float), scale * inv, out);
  }
  return 0;
}

}  // namespace ccl::training
