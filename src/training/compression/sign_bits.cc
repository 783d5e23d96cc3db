#include "compression/sign_bits.h"

namespace ccl::training::sign_bits {

void pack(std::span<const float> values, uint8_t* bits) {
  const size_t n = values.size();
  for (size_t byte = 0; byte * 8 < n; ++byte) {
    uint8_t b = 0;
    const size_t end = byte * 8 + 8 < n ? byte * 8 + 8 : n;
    for (size_t i = byte * 8; i < end; ++i)
      b |= static_cast<uint8_t>(values[i] >= 0.0f) << (i - byte * 8);
    bits[byte] = b;
  }
}

void add_scaled(const uint8_t* bits, float scale, std::span<float> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] += ((bits[i / 8] >> (i % 8)) & 1u) != 0 ? scale : -scale;
  }
}

}  // namespace ccl::training::sign_bits
