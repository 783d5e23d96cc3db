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
  // Whole bytes first, 8 elements each with constant shifts (the compiler turns them into vector
  // selects), then the tail.
  const size_t n = out.size(), whole = n / 8;
  float* o = out.data();
  for (size_t byte = 0; byte < whole; ++byte) {
    const unsigned b = bits[byte];
    for (unsigned j = 0; j < 8; ++j) o[byte * 8 + j] += ((b >> j) & 1u) != 0 ? scale : -scale;
  }
  for (size_t i = whole * 8; i < n; ++i) {
    o[i] += ((bits[i / 8] >> (i % 8)) & 1u) != 0 ? scale : -scale;
  }
}

}  // namespace ccl::training::sign_bits
