#include "float_format.h"

#include <algorithm>
#include <cmath>

namespace ccl::perf {
namespace {

int bias(const FloatFormat& f) { return (1 << (f.exp_bits - 1)) - 1; }
uint32_t exp_all_ones(const FloatFormat& f) { return (1u << f.exp_bits) - 1; }
uint32_t man_all_ones(const FloatFormat& f) { return (1u << f.man_bits) - 1; }
uint32_t sign_bit(const FloatFormat& f) { return 1u << (f.exp_bits + f.man_bits); }

// The largest finite magnitude's (exponent field, mantissa field).
void max_finite(const FloatFormat& f, uint32_t* e, uint32_t* m) {
  if (f.ieee_specials) {
    *e = exp_all_ones(f) - 1;
    *m = man_all_ones(f);
  } else {
    *e = exp_all_ones(f);
    *m = man_all_ones(f) - 1;  // all ones is NaN
  }
}

uint32_t quiet_nan(const FloatFormat& f) {
  if (!f.ieee_specials) return (exp_all_ones(f) << f.man_bits) | man_all_ones(f);
  return (exp_all_ones(f) << f.man_bits) | (1u << (f.man_bits - 1));
}

}  // namespace

bool is_nan_bits(uint32_t bits, const FloatFormat& f) {
  const uint32_t e = (bits >> f.man_bits) & exp_all_ones(f);
  const uint32_t m = bits & man_all_ones(f);
  if (e != exp_all_ones(f)) return false;
  return f.ieee_specials ? m != 0 : m == man_all_ones(f);
}

double decode_float(uint32_t bits, const FloatFormat& f) {
  const bool neg = (bits & sign_bit(f)) != 0;
  const uint32_t e = (bits >> f.man_bits) & exp_all_ones(f);
  const uint32_t m = bits & man_all_ones(f);
  double v;
  if (is_nan_bits(bits, f)) {
    v = std::nan("");
  } else if (f.ieee_specials && e == exp_all_ones(f)) {
    v = INFINITY;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias(f) - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.man_bits)),
                   static_cast<int>(e) - bias(f) - f.man_bits);
  }
  return neg ? -v : v;
}

uint32_t encode_float(double v, const FloatFormat& f) {
  if (std::isnan(v)) return quiet_nan(f);
  const uint32_t sign = std::signbit(v) ? sign_bit(f) : 0;
  const double a = std::fabs(v);
  uint32_t max_e, max_m;
  max_finite(f, &max_e, &max_m);
  const uint32_t overflow =
      f.ieee_specials ? (exp_all_ones(f) << f.man_bits) : ((max_e << f.man_bits) | max_m);
  if (std::isinf(a)) return sign | overflow;
  if (a == 0) return sign;

  const int emin = 1 - bias(f);  // exponent of the smallest normal
  int e2;
  std::frexp(a, &e2);  // a = fr * 2^e2 with fr in [0.5, 1)
  const int e = std::max(e2 - 1, emin);
  // Scale so that one unit in the last place is 1, round to an integer (ties to even: the
  // default rounding mode), and rebuild; the scaling by a power of two is exact.
  const double q = std::nearbyint(std::ldexp(a, f.man_bits - e));
  // q is in [0, 2^(man_bits+1)]; it reaches 2^(man_bits+1) when rounding carried into the
  // next binade, and is below 2^man_bits for subnormals.
  uint32_t field_e, field_m;
  const auto qi = static_cast<uint64_t>(q);
  if (qi >= (uint64_t{2} << f.man_bits)) {  // carried: 2^(man_bits+1) * 2^(e - man_bits)
    field_e = static_cast<uint32_t>(e + 1 + bias(f));
    field_m = 0;
  } else if (qi >= (uint64_t{1} << f.man_bits)) {
    field_e = static_cast<uint32_t>(e + bias(f));
    field_m = static_cast<uint32_t>(qi) & man_all_ones(f);
  } else {  // subnormal (e == emin) or rounded to zero
    field_e = 0;
    field_m = static_cast<uint32_t>(qi);
  }
  if (field_e > max_e || (field_e == max_e && field_m > max_m)) return sign | overflow;
  return sign | (field_e << f.man_bits) | field_m;
}

}  // namespace ccl::perf
