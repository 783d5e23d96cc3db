#include "pattern.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "datatype.h"
#include "float_format.h"

namespace ccl::perf {
namespace {

uint64_t mix(int rank, size_t index, uint64_t seed) {
  uint64_t h = index * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xC2B2AE3D27D4EB4Full +
               seed * 0x165667B19E3779F9ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h;
}

// The inputs of one check, with everything that does not depend on the element computed once.
class InputGen {
 public:
  InputGen(cclDataType_t type, cclRedOp_t op, int nranks, uint64_t seed)
      : t_(type_info(type)), op_(op), n_(nranks), seed_(seed) {
    per_ = std::min<int64_t>(t_.exact_int / n_, 1 << 16);
    max_twos_ = std::min<int64_t>(t_.max_pow2, n_);
    plain_range_ = std::min<int64_t>(t_.exact_int, t_.kind == TypeKind::Unsigned ? 200 : 100);
  }

  int64_t plain(int rank, size_t index) const {
    const uint64_t h = mix(rank, index, seed_);
    if (t_.kind == TypeKind::Unsigned) return below(h, plain_range_ + 1);
    return -plain_range_ + below(h, 2 * plain_range_ + 1);
  }

  int64_t reduce(int rank, size_t index) const {
    return reduce_at(rank, index, static_cast<int64_t>(index % static_cast<uint64_t>(n_)));
  }

  // `index_mod_n` = index % nranks, hoisted out of loops over ranks.
  int64_t reduce_at(int rank, size_t index, int64_t index_mod_n) const {
    switch (op_) {
      case cclSum:
      case cclAvg: {
        // Every |partial sum| <= sum of |inputs| <= exact_int.
        if (per_ >= 1) {
          const int64_t v = below(mix(rank, index, seed_), per_ + 1);
          return t_.kind == TypeKind::Unsigned ? v : v - per_ / 2;
        }
        // More ranks than exact integers: k <= exact_int of them contribute 1.
        const int64_t k = below(mix(-1, index, seed_), t_.exact_int + 1);
        return position(rank, index_mod_n) < k ? 1 : 0;
      }
      case cclProd: {
        // k ranks contribute 2, some others -1: every partial product is +-2^j with j <= k.
        const int64_t k = below(mix(-1, index, seed_), max_twos_ + 1);
        if (position(rank, index_mod_n) < k) return 2;
        if (t_.kind != TypeKind::Unsigned && (mix(rank, index, seed_) & 3) == 0) return -1;
        return 1;
      }
      default:  // max, min
        return plain(rank, index);
    }
  }

 private:
  // A value in [0, n) from the top bits of a hash, with a multiply instead of a division.
  static int64_t below(uint64_t h, int64_t n) {
    return static_cast<int64_t>(((h >> 32) * static_cast<uint64_t>(n)) >> 32);
  }
  // Where `rank` sits in a rotation that moves with the element: for every element, exactly k
  // ranks have a position below k.
  int64_t position(int rank, int64_t index_mod_n) const {
    const int64_t p = rank + index_mod_n;
    return p < n_ ? p : p - n_;
  }

 private:
  const TypeInfo& t_;
  cclRedOp_t op_;
  int64_t n_;
  uint64_t seed_;
  int64_t per_, max_twos_, plain_range_;
};

// Writes exact integers (and, for avg, ratios num / den) as elements of one type. The small
// floating types go through tables: every value the checker stores there is a small integer.
class Writer {
 public:
  // `tables`: worth it for whole buffers, not for one element.
  explicit Writer(cclDataType_t type, int64_t den = 1, bool tables = true)
      : type_(type), size_(type_info(type).size), fmt_(small_float_format(type)), den_(den) {
    if (!fmt_ || !tables) return;
    ints_.resize(2 * kRange + 1);
    ratios_.resize(2 * kRange + 1);
    for (int64_t v = -kRange; v <= kRange; ++v) {
      ints_[static_cast<size_t>(v + kRange)] = encode_float(static_cast<double>(v), *fmt_);
      ratios_[static_cast<size_t>(v + kRange)] = ratio_bits(v);
    }
  }

  void put(void* buf, size_t i, int64_t v) const {
    switch (type_) {
      case cclInt8:
        return store<int8_t>(buf, i, static_cast<int8_t>(v));
      case cclUint8:
        return store<uint8_t>(buf, i, static_cast<uint8_t>(v));
      case cclInt32:
        return store<int32_t>(buf, i, static_cast<int32_t>(v));
      case cclUint32:
        return store<uint32_t>(buf, i, static_cast<uint32_t>(v));
      case cclInt64:
        return store<int64_t>(buf, i, v);
      case cclUint64:
        return store<uint64_t>(buf, i, static_cast<uint64_t>(v));
      case cclFloat32:
        return store<float>(buf, i, static_cast<float>(v));
      case cclFloat64:
        return store<double>(buf, i, static_cast<double>(v));
      default:
        return put_bits(buf, i,
                        in_range(v) ? ints_[static_cast<size_t>(v + kRange)]
                                    : encode_float(static_cast<double>(v), *fmt_));
    }
  }

  // num / den: truncated for integers (as C++ and the library divide), rounded to nearest even
  // for floating types. The quotient is rounded once to double, then to the type; rounding twice
  // could differ from rounding the exact quotient only if its binary expansion had a run of
  // about 29 equal bits, and a ratio with a small denominator has none longer than log2(den)+1.
  void put_ratio(void* buf, size_t i, int64_t num) const {
    if (type_info(type_).kind != TypeKind::Float) return put(buf, i, num / den_);
    const double q = static_cast<double>(num) / static_cast<double>(den_);
    switch (type_) {
      case cclFloat32:
        return store<float>(buf, i, static_cast<float>(q));
      case cclFloat64:
        return store<double>(buf, i, q);
      default:
        return put_bits(
            buf, i, in_range(num) ? ratios_[static_cast<size_t>(num + kRange)] : ratio_bits(num));
    }
  }

 private:
  static constexpr int64_t kRange = 4096;  // above every exact_int of the small types

  bool in_range(int64_t v) const { return !ints_.empty() && v >= -kRange && v <= kRange; }
  uint32_t ratio_bits(int64_t num) const {
    return encode_float(static_cast<double>(num) / static_cast<double>(den_), *fmt_);
  }
  template <typename T>
  static void store(void* buf, size_t i, T v) {
    std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
  }
  void put_bits(void* buf, size_t i, uint32_t bits) const {
    if (size_ == 1) return store<uint8_t>(buf, i, static_cast<uint8_t>(bits));
    store<uint16_t>(buf, i, static_cast<uint16_t>(bits));
  }

  cclDataType_t type_;
  size_t size_;
  const FloatFormat* fmt_;
  int64_t den_;
  std::vector<uint32_t> ints_, ratios_;
};

}  // namespace

int64_t plain_input(cclDataType_t type, int rank, size_t index, uint64_t seed) {
  return InputGen(type, cclMax, 1, seed).plain(rank, index);
}

int64_t reduce_input(const CheckSpec& spec, int rank, size_t index) {
  return InputGen(spec.type, spec.op, spec.nranks, spec.seed).reduce(rank, index);
}

void store_value(cclDataType_t type, void* buf, size_t index, int64_t v) {
  Writer(type, 1, false).put(buf, index, v);
}

void store_ratio(cclDataType_t type, void* buf, size_t index, int64_t num, int64_t den) {
  Writer(type, den, false).put_ratio(buf, index, num);
}

void fill_reduce_input(void* buf, size_t count, const CheckSpec& spec, int rank) {
  const InputGen gen(spec.type, spec.op, spec.nranks, spec.seed);
  const Writer w(spec.type);
  for (size_t i = 0; i < count; ++i) w.put(buf, i, gen.reduce(rank, i));
}

void fill_reduce_expected(void* buf, size_t count, const CheckSpec& spec, size_t first) {
  const InputGen gen(spec.type, spec.op, spec.nranks, spec.seed);
  const Writer w(spec.type, spec.nranks);
  const auto n = static_cast<uint64_t>(spec.nranks);
  for (size_t j = 0; j < count; ++j) {
    const size_t i = first + j;
    const auto i_mod_n = static_cast<int64_t>(i % n);
    int64_t acc = gen.reduce_at(0, i, i_mod_n);
    for (int r = 1; r < spec.nranks; ++r) {
      const int64_t v = gen.reduce_at(r, i, i_mod_n);
      switch (spec.op) {
        case cclSum:
        case cclAvg:
          acc += v;
          break;
        case cclProd:
          acc *= v;
          break;
        case cclMax:
          acc = std::max(acc, v);
          break;
        case cclMin:
          acc = std::min(acc, v);
          break;
        default:
          break;
      }
    }
    if (spec.op == cclAvg) {
      w.put_ratio(buf, j, acc);
    } else {
      w.put(buf, j, acc);
    }
  }
}

void fill_plain(void* buf, size_t count, cclDataType_t type, int rank, uint64_t seed,
                size_t first) {
  const InputGen gen(type, cclMax, 1, seed);
  const Writer w(type);
  for (size_t i = 0; i < count; ++i) w.put(buf, i, gen.plain(rank, first + i));
}

int64_t count_wrong(const void* got, const void* expected, size_t count, cclDataType_t type) {
  const size_t size = type_info(type).size;
  if (std::memcmp(got, expected, count * size) == 0) return 0;
  const auto* a = static_cast<const unsigned char*>(got);
  const auto* b = static_cast<const unsigned char*>(expected);
  const FloatFormat* small = small_float_format(type);
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const unsigned char* x = a + i * size;
    const unsigned char* y = b + i * size;
    if (std::memcmp(x, y, size) == 0) continue;
    bool both_nan = false;
    if (small) {
      uint32_t bx = 0, by = 0;
      std::memcpy(&bx, x, size);  // little-endian host
      std::memcpy(&by, y, size);
      both_nan = is_nan_bits(bx, *small) && is_nan_bits(by, *small);
    } else if (type == cclFloat32) {
      float fx, fy;
      std::memcpy(&fx, x, 4);
      std::memcpy(&fy, y, 4);
      both_nan = fx != fx && fy != fy;
    } else if (type == cclFloat64) {
      double dx, dy;
      std::memcpy(&dx, x, 8);
      std::memcpy(&dy, y, 8);
      both_nan = dx != dx && dy != dy;
    }
    if (!both_nan) ++wrong;
  }
  return wrong;
}

void* op_send_ptr(const CheckSpec& spec, int rank, const Geometry& g, bool in_place, void* send,
                  void* recv) {
  if (!in_place) return send;
  const size_t elt = type_info(spec.type).size;
  return static_cast<char*>(recv) + static_cast<size_t>(rank) * g.send_inplace_offset * elt;
}

void* op_recv_ptr(const CheckSpec& spec, int rank, const Geometry& g, bool in_place, void* recv) {
  if (!in_place) return recv;
  const size_t elt = type_info(spec.type).size;
  return static_cast<char*>(recv) + static_cast<size_t>(rank) * g.recv_inplace_offset * elt;
}

bool checked_in_place(Collective coll) {
  return coll != Collective::AlltoAll && coll != Collective::SendRecv;
}

void prepare_check(const CheckSpec& spec, int rank, const Geometry& g, bool in_place,
                   const CheckBuffers& buffers) {
  const size_t elt = type_info(spec.type).size;
  char* expected = static_cast<char*>(buffers.expected);
  void* input = op_send_ptr(spec, rank, g, in_place, buffers.send, buffers.recv);
  // Zeroed before the input is written: in place, the input lies inside the receive buffer
  // (and reducescatter's is longer than its result).
  const size_t zeroed = in_place ? std::max(g.send_count, g.recv_count) : g.recv_count;
  std::memset(buffers.recv, 0, zeroed * elt);
  switch (spec.coll) {
    case Collective::AllReduce:
      fill_reduce_input(input, g.send_count, spec, rank);
      fill_reduce_expected(expected, g.recv_count, spec);
      return;
    case Collective::Reduce:
      fill_reduce_input(input, g.send_count, spec, rank);
      if (rank == spec.root) {
        fill_reduce_expected(expected, g.recv_count, spec);
      } else {  // untouched: zeros, or in place the rank's own input
        std::memcpy(expected, op_recv_ptr(spec, rank, g, in_place, buffers.recv),
                    g.recv_count * elt);
      }
      return;
    case Collective::ReduceScatter:  // this rank's block of the reduced vector
      fill_reduce_input(input, g.send_count, spec, rank);
      fill_reduce_expected(expected, g.recv_count, spec, static_cast<size_t>(rank) * g.param_count);
      return;
    case Collective::Broadcast:
      if (rank == spec.root) fill_plain(input, g.send_count, spec.type, spec.root, spec.seed);
      fill_plain(expected, g.recv_count, spec.type, spec.root, spec.seed);
      return;
    case Collective::AllGather:  // every rank's piece, in rank order
      fill_plain(input, g.send_count, spec.type, rank, spec.seed);
      for (int r = 0; r < spec.nranks; ++r) {
        fill_plain(expected + static_cast<size_t>(r) * g.param_count * elt, g.param_count,
                   spec.type, r, spec.seed);
      }
      return;
    case Collective::AlltoAll:  // piece q of the result: piece `rank` of rank q's input
      fill_plain(input, g.send_count, spec.type, rank, spec.seed);
      for (int q = 0; q < spec.nranks; ++q) {
        fill_plain(expected + static_cast<size_t>(q) * g.param_count * elt, g.param_count,
                   spec.type, q, spec.seed, static_cast<size_t>(rank) * g.param_count);
      }
      return;
    case Collective::SendRecv:  // a ring: from the previous rank
      fill_plain(input, g.send_count, spec.type, rank, spec.seed);
      fill_plain(expected, g.recv_count, spec.type, (rank + spec.nranks - 1) % spec.nranks,
                 spec.seed);
      return;
  }
}

}  // namespace ccl::perf
