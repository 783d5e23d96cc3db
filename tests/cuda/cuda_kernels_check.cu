// GPU check of the CUDA kernels: loads the fatbin ccl embeds (ccl_cuda_fatbin, the same bytes
// libccl loads) with the runtime's library API, runs every kernel on the GPU and compares its
// output byte for byte with the CPU kernel of src/algorithms/reduce on the same input (a NaN
// matches any NaN: payloads and signs are not part of the contract). Inputs: special values,
// random data, every code of the 16- and 8-bit floats (all pairs for fp8), integer wrap-around;
// counts 0, 1, 15, 4097 and 1M; pointers misaligned alike, differently, or aliased (dst == a,
// dst == b); bytes around dst must stay untouched. Then the GB/s of each kernel at 256 MiB,
// against cudaMemcpy device to device.
//
// Exit status: 0 all identical, 1 a difference or a CUDA error, 77 no usable GPU (ctest's skip).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/reduce/cuda/cuda_fatbin.h"
#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "algorithms/reduce/cuda/cuda_launch.h"
#include "algorithms/reduce/reduce.h"
#include "check_bandwidth.h"
#include "check_data.h"
#include "check_gpu.h"

namespace ccl::cuda_check {
namespace {

using Bytes = std::vector<unsigned char>;

constexpr unsigned char kSentinel = 0xa5;
constexpr size_t kSlack = 64;                // sentinel bytes checked past each dst
constexpr size_t kDeviceBuffer = 32u << 20;  // per operand, correctness cases

enum class Alias { None, DstIsA, DstIsB };

struct Layout {
  size_t off_a, off_b, off_d;  // byte offsets from 256-byte aligned allocations
  Alias alias;
};

// Aligned alike; misaligned alike (by one element, by one byte: byte path); agreeing only modulo
// 8, 4, 2 or 1 byte (the narrower vector paths, or bytes); dst aliasing a or b.
std::vector<Layout> layouts(size_t size) {
  return {
      {0, 0, 0, Alias::None},  {size, size, size, Alias::None}, {1, 1, 1, Alias::None},
      {8, 0, 24, Alias::None}, {0, 4, 12, Alias::None},         {2, 0, 6, Alias::None},
      {1, 2, 3, Alias::None},  {size, 0, 0, Alias::DstIsA},     {0, 3 * size, 0, Alias::DstIsB}};
}

// Compares the n elements of type t at got + off with want, and that every other byte of
// got[0, off + n * size + kSlack) is still the sentinel.
bool same(Gpu& g, const std::string& what, cclDataType_t t, const Bytes& got, size_t off,
          const Bytes& want, const Bytes* untouched = nullptr) {
  const size_t size = reduce::datatype_size(t), n = want.size() / size;
  ++g.cases;
  g.elements += n;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = element(t, got.data() + off, i), y = element(t, want.data(), i);
    if (x == y) continue;
    if (is_nan(t, x) && is_nan(t, y)) {
      ++g.nan_elements;
      continue;
    }
    char msg[160];
    std::snprintf(msg, sizeof msg, " element %zu of %zu: GPU 0x%llx, CPU 0x%llx", i, n, (u64)x,
                  (u64)y);
    g.failures.push_back(what + msg);
    return false;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const bool inside = i >= off && i < off + want.size();
    const unsigned char expect = untouched ? (*untouched)[i] : kSentinel;
    if (!inside && got[i] != expect) {
      g.failures.push_back(what + " wrote byte " + std::to_string(i) + " outside dst");
      return false;
    }
  }
  return true;
}

// Fills [0, bytes) of a device buffer with the sentinel and puts data at off.
void place(unsigned char* dev, size_t region, size_t off, const Bytes& data) {
  check(cudaMemset(dev, kSentinel, region), "cudaMemset");
  if (!data.empty()) {
    check(cudaMemcpy(dev + off, data.data(), data.size(), cudaMemcpyHostToDevice), "to device");
  }
}

Bytes fetch(const unsigned char* dev, size_t region) {
  Bytes out(region);
  check(cudaMemcpy(out.data(), dev, region, cudaMemcpyDeviceToHost), "to host");
  return out;
}

std::string label(const char* name, size_t n, const Layout& l) {
  static const char* kAlias[] = {"", " dst=a", " dst=b"};
  return std::string(name) + " n=" + std::to_string(n) + " offsets " + std::to_string(l.off_a) +
         "/" + std::to_string(l.off_b) + "/" + std::to_string(l.off_d) + kAlias[int(l.alias)];
}

bool reduce_case(Gpu& g, cclDataType_t t, cclRedOp_t op, const Bytes& a, const Bytes& b,
                 const Layout& l) {
  const char* name = rc::reduce_kernel_name(t, op);
  const size_t size = reduce::datatype_size(t), n = a.size() / size;
  const size_t region = a.size() + 4 * size + kSlack + 32;
  place(g.buf[0], region, l.off_a, a);
  place(g.buf[1], region, l.off_b, b);
  place(g.buf[2], region, 0, {});
  unsigned char* dst = l.alias == Alias::DstIsA   ? g.buf[0] + l.off_a
                       : l.alias == Alias::DstIsB ? g.buf[1] + l.off_b
                                                  : g.buf[2] + l.off_d;
  g.launch(name, n, size, static_cast<void*>(dst), static_cast<const void*>(g.buf[0] + l.off_a),
           static_cast<const void*>(g.buf[1] + l.off_b), u64(n));
  Bytes want = l.alias == Alias::DstIsB ? b : a;
  const auto fn = reduce::reduce_kernel(t, op);
  if (l.alias == Alias::None) {
    fn(want.data(), a.data(), b.data(), n);
  } else if (l.alias == Alias::DstIsA) {
    fn(want.data(), want.data(), b.data(), n);
  } else {
    fn(want.data(), a.data(), want.data(), n);
  }
  const int which = l.alias == Alias::DstIsA ? 0 : l.alias == Alias::DstIsB ? 1 : 2;
  const size_t off = l.alias == Alias::DstIsA   ? l.off_a
                     : l.alias == Alias::DstIsB ? l.off_b
                                                : l.off_d;
  return same(g, label(name, n, l), t, fetch(g.buf[which], region), off, want);
}

bool divide_case(Gpu& g, cclDataType_t t, const Bytes& data, size_t off, u64 divisor) {
  const char* name = rc::divide_kernel_name(t);
  const size_t size = reduce::datatype_size(t), n = data.size() / size;
  const size_t region = data.size() + off + kSlack;
  place(g.buf[0], region, off, data);
  g.launch(name, n, size, static_cast<void*>(g.buf[0] + off), u64(n), divisor);
  Bytes want = data;
  if (divisor != 0) reduce::divide_kernel(t)(want.data(), n, divisor);  // 0: left unchanged
  return same(g,
              std::string(name) + " n=" + std::to_string(n) + " off " + std::to_string(off) +
                  " divisor " + std::to_string(divisor),
              t, fetch(g.buf[0], region), off, want);
}

bool scale_case(Gpu& g, cclDataType_t t, const Bytes& src, const Layout& l, uint64_t factor) {
  const char* name = rc::scale_kernel_name(t);
  const size_t size = reduce::datatype_size(t), n = src.size() / size;
  const size_t region = src.size() + 4 * size + kSlack + 32;
  place(g.buf[0], region, l.off_a, src);
  place(g.buf[2], region, 0, {});
  const bool in_place = l.alias != Alias::None;
  unsigned char* dst = in_place ? g.buf[0] + l.off_a : g.buf[2] + l.off_d;
  g.launch(name, n, size, static_cast<void*>(dst), static_cast<const void*>(g.buf[0] + l.off_a),
           u64(n), u64(factor));
  Bytes want(src.size());
  reduce::scale_kernel(t)(want.data(), src.data(), n, &factor);  // reads the low bytes
  char what[64];
  std::snprintf(what, sizeof what, " factor 0x%llx", u64(factor));
  return same(g, label(name, n, l) + what, t, fetch(g.buf[in_place ? 0 : 2], region),
              in_place ? l.off_a : l.off_d, want);
}

bool copy_case(Gpu& g, size_t bytes, size_t off_src, size_t off_dst) {
  Bytes src(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  const size_t region = bytes + 32 + kSlack;
  place(g.buf[0], region, off_src, src);
  place(g.buf[2], region, 0, {});
  g.launch("ccl_copy", bytes, 1, static_cast<void*>(g.buf[2] + off_dst),
           static_cast<const void*>(g.buf[0] + off_src), u64(bytes));
  return same(g,
              "ccl_copy n=" + std::to_string(bytes) + " offsets " + std::to_string(off_src) + "/" +
                  std::to_string(off_dst),
              cclUint8, fetch(g.buf[2], region), off_dst, src);
}

// All codes of an 8- or 16-bit type against partners (for 8 bits: every pair), both orders.
std::vector<std::pair<Bytes, Bytes>> exhaustive_pairs(cclDataType_t t) {
  const size_t size = reduce::datatype_size(t);
  std::vector<uint64_t> a, b;
  if (size == 1) {
    for (uint64_t i = 0; i < 65536; ++i) a.push_back(i & 0xff), b.push_back(i >> 8);
  } else {
    std::vector<uint64_t> partners = specials(t);
    const std::vector<uint64_t> more = mixed(t, 8, 99);
    partners.insert(partners.end(), more.begin(), more.end());
    for (uint64_t p : partners) {
      for (uint64_t i = 0; i < 65536; ++i) a.push_back(i), b.push_back(p);
    }
  }
  return {{to_bytes(t, a), to_bytes(t, b)}, {to_bytes(t, b), to_bytes(t, a)}};
}

// Every ordered pair of special values.
std::pair<Bytes, Bytes> special_pairs(cclDataType_t t) {
  const std::vector<uint64_t> sp = specials(t);
  std::vector<uint64_t> a, b;
  for (uint64_t x : sp) {
    for (uint64_t y : sp) a.push_back(x), b.push_back(y);
  }
  return {to_bytes(t, a), to_bytes(t, b)};
}

Bytes all_codes(cclDataType_t t) {
  std::vector<uint64_t> v(size_t(1) << (8 * reduce::datatype_size(t)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  return to_bytes(t, v);
}

void check_type(Gpu& g, cclDataType_t t) {
  const size_t size = reduce::datatype_size(t);
  const size_t kCounts[] = {0, 1, 15, 4097, size_t(1) << 20};
  // Every code (every pair for the 8-bit types) where that is at most 65536 of them.
  const bool every_code = size == 1 || (is_float(t) && size == 2);
  for (int op = 0; op < rc::kNumBaseOps; ++op) {
    const auto o = static_cast<cclRedOp_t>(op);
    bool ok = true;
    for (size_t n : kCounts) {
      const Bytes a = to_bytes(t, mixed(t, n, 1000 + n)), b = to_bytes(t, mixed(t, n, 2000 + n));
      for (const Layout& l : layouts(size)) {
        // 1M elements only where they exercise a different loop (aligned, misaligned alike,
        // bytes): the transfers, not the GPU, are what costs time.
        if (n > 4097 && l.off_a != l.off_b && l.alias == Alias::None) continue;
        ok &= reduce_case(g, t, o, a, b, l);
      }
    }
    const auto sp = special_pairs(t);
    ok &= reduce_case(g, t, o, sp.first, sp.second, {0, 0, 0, Alias::None});
    if (every_code) {
      for (const auto& [a, b] : exhaustive_pairs(t)) {
        ok &= reduce_case(g, t, o, a, b, {0, 0, 0, Alias::None});
      }
    }
    if (ok) g.passed.push_back(rc::reduce_kernel_name(t, o));
  }

  // Divide: ranks-like divisors, ones whose float conversion rounds, 0 (a no-op).
  bool ok = true;
  const u64 divisors[] = {1, 2, 3, 7, 8, 1000003, (1ull << 32) + 1, (1ull << 53) + 1, ~0ull};
  for (size_t n : kCounts) {
    const Bytes data = to_bytes(t, mixed(t, n, 3000 + n));
    for (size_t off : {size_t(0), size, size_t(1), size_t(3)}) {
      if (n > 4097 && off == size) continue;
      for (u64 d : {u64(3), u64(8), (1ull << 53) + 1}) ok &= divide_case(g, t, data, off, d);
    }
  }
  const Bytes codes = every_code ? all_codes(t) : to_bytes(t, mixed(t, 65536, 77));
  for (u64 d : divisors) ok &= divide_case(g, t, codes, 0, d);
  ok &= divide_case(g, t, codes, size, 0);
  if (ok) g.passed.push_back(rc::divide_kernel_name(t));

  // Scale: every special value as the factor, over every code (8 and 16 bits) or mixed data.
  ok = true;
  for (uint64_t factor : specials(t)) ok &= scale_case(g, t, codes, {0, 0, 0, Alias::None}, factor);
  std::mt19937_64 rng(5);
  const uint64_t factor = ordinary(t, rng);
  for (size_t n : kCounts) {
    const Bytes src = to_bytes(t, mixed(t, n, 4000 + n));
    for (const Layout& l : layouts(size)) {
      if (n > 4097 && l.off_a != l.off_d && l.alias == Alias::None) continue;
      ok &= scale_case(g, t, src, l, factor);
    }
  }
  if (ok) g.passed.push_back(rc::scale_kernel_name(t));
}

void check_copy(Gpu& g) {
  bool ok = true;
  for (size_t n : {size_t(0), size_t(1), size_t(15), size_t(4097), size_t(1) << 20}) {
    const size_t offsets[][2] = {{0, 0}, {1, 1}, {1, 2}, {3, 7}, {2, 6}, {4, 0}, {8, 0}, {0, 13}};
    for (const auto& o : offsets) ok &= copy_case(g, n, o[0], o[1]);
  }
  if (ok) g.passed.push_back("ccl_copy");
}

int run() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
      (e == cudaSuccess && devices == 0)) {
    std::printf("SKIP: no CUDA device (%s)\n", cudaGetErrorName(e));
    return 77;
  }
  check(e, "cudaGetDeviceCount");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  if (prop.major < 8) {
    std::printf("SKIP: no CUDA device of sm_80 or later (device 0 is sm_%d%d)\n", prop.major,
                prop.minor);
    return 77;
  }
  Gpu g;
  g.sm_count = prop.multiProcessorCount;
  check(cudaLibraryLoadData(&g.library, ccl_cuda_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0),
        "cudaLibraryLoadData(ccl_cuda_fatbin)");
  for (auto& p : g.buf) check(cudaMalloc(&p, kDeviceBuffer), "cudaMalloc");
  std::printf("%s (sm_%d%d, %d SMs); fatbin %llu bytes\n", prop.name, prop.major, prop.minor,
              g.sm_count, ccl_cuda_fatbin_size);

  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < cclNumTypes; ++t) check_type(g, static_cast<cclDataType_t>(t));
  check_copy(g);
  const double check_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& f : g.failures) std::printf("MISMATCH %s\n", f.c_str());
  std::printf("correctness: %.1f s\n", check_s);
  bandwidth(g);
  for (auto* p : g.buf) cudaFree(p);
  cudaLibraryUnload(g.library);

  const bool all = g.failures.empty() && int(g.passed.size()) == rc::kNumKernels;
  std::printf(
      "cuda_kernels_check: %zu kernels bit-identical to the CPU (of %d), %llu cases, %llu "
      "elements (%llu NaN results NaN on both sides), %zu mismatches\n",
      g.passed.size(), rc::kNumKernels, g.cases, g.elements, g.nan_elements, g.failures.size());
  return all ? 0 : 1;
}

}  // namespace
}  // namespace ccl::cuda_check

int main() { return ccl::cuda_check::run(); }
