// One bit per element: set for x >= 0 (sign 0 counts as +, as DeepSpeed's packing does), bit i of
// byte i/8 for element i. Shared by ScaledSign and OneBit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ccl::training::sign_bits {

/// Bytes that hold `count` signs.
constexpr size_t bytes_for(size_t count) { return (count + 7) / 8; }

/// Writes the signs of `values` into `bits` (bytes_for(values.size()) bytes).
void pack(std::span<const float> values, uint8_t* bits);

/// out[i] += scale · (bit i ? +1 : −1) for every i < out.size().
void add_scaled(const uint8_t* bits, float scale, std::span<float> out);

}  // namespace ccl::training::sign_bits
