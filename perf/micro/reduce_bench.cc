// Reduce kernels: sum of every datatype on every ISA this CPU runs, at 64 KiB, 1 MiB and 16 MiB
// per operand. bytes_per_second counts the memory traffic: 2 reads + 1 write for a reduce, and
// 1 read + 1 write for the memcpy baseline of the same size, so the two read side by side.
//   build-dir/perf/reduce_bench [--benchmark_filter=1048576]
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "algorithms/reduce/reduce.h"

namespace {

using ccl::reduce::Isa;

const int64_t kSizes[] = {64 << 10, 1 << 20, 16 << 20};

// Ordinary values (no NaN, inf or subnormals, which would time something else).
void fill(std::vector<unsigned char>& buf, cclDataType_t t, int seed) {
  const size_t size = ccl::reduce::datatype_size(t);
  for (size_t i = 0; i < buf.size() / size; ++i) {
    const float v = 1.0f + float((i * 7 + seed) % 16) / 16.0f;
    uint64_t bits = 0;
    switch (t) {
      case cclFloat16:
        bits = ccl::reduce::float_to_half(v);
        break;
      case cclBfloat16:
        bits = ccl::reduce::float_to_bf16(v);
        break;
      case cclFloat8e4m3:
        bits = ccl::reduce::float_to_fp8e4m3(v);
        break;
      case cclFloat8e5m2:
        bits = ccl::reduce::float_to_fp8e5m2(v);
        break;
      case cclFloat32:
        std::memcpy(&bits, &v, 4);
        break;
      case cclFloat64: {
        const double d = v;
        std::memcpy(&bits, &d, 8);
        break;
      }
      default:
        bits = i * 13 + uint64_t(seed);
    }
    std::memcpy(buf.data() + i * size, &bits, size);
  }
}

void bm_reduce(benchmark::State& state, Isa isa, cclDataType_t t) {
  const size_t bytes = size_t(state.range(0));
  const size_t count = bytes / ccl::reduce::datatype_size(t);
  const ccl::reduce::ReduceFn fn = ccl::reduce::reduce_kernel_for(isa, t, cclSum);
  std::vector<unsigned char> a(bytes), b(bytes), d(bytes);
  fill(a, t, 1);
  fill(b, t, 2);
  for (auto _ : state) {
    fn(d.data(), a.data(), b.data(), count);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 3 * int64_t(bytes));
}

void bm_memcpy(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0));
  std::vector<unsigned char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * int64_t(bytes));
}

void register_all() {
  for (int64_t size : kSizes) {
    benchmark::RegisterBenchmark("memcpy", bm_memcpy)->Arg(size);
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (ccl::reduce::reduce_kernel_for(isa, cclFloat32, cclSum) == nullptr) continue;
      for (int t = 0; t < cclNumTypes; ++t) {
        const auto type = cclDataType_t(t);
        const std::string name = std::string("sum/") + ccl::reduce::datatype_name(type) + "/" +
                                 ccl::reduce::isa_name(isa);
        benchmark::RegisterBenchmark(name.c_str(), bm_reduce, isa, type)->Arg(size);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
