// One LAMB step (ccl::training::Lamb) over 1M and 16M float parameters, held as one tensor and
// as 64 equal tensors. Bytes processed are the parameters' bytes (4 per float), so the rate
// reads in GB/s of parameters; perf/training/lamb_torch.py times the same update in torch.
//
//   build/perf/lamb_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ccl/training/optim.hpp"

namespace {

using ccl::training::Lamb;
using ccl::training::LambOptions;
using ccl::training::ParamRef;

void BM_LambStep(benchmark::State& state) {
  const auto total = static_cast<size_t>(state.range(0));
  const auto tensors = static_cast<size_t>(state.range(1));
  const size_t count = total / tensors;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> x(total), g(total);
  for (auto& e : x) e = value(rng);
  for (auto& e : g) e = value(rng);
  std::vector<ParamRef> params;
  for (size_t t = 0; t < tensors; ++t) {
    params.push_back({.param = x.data() + t * count, .grad = g.data() + t * count, .count = count});
  }
  // A small lr keeps the parameters in range over many thousands of steps; it does not change
  // the work.
  Lamb lamb(LambOptions{.lr = 1e-7});
  lamb.step(params);  // the first step allocates the moments
  for (auto _ : state) {
    lamb.step(params);
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * total * sizeof(float)));
}

BENCHMARK(BM_LambStep)
    ->ArgNames({"floats", "tensors"})
    ->Args({1 << 20, 1})
    ->Args({1 << 20, 64})
    ->Args({16 << 20, 1})
    ->Args({16 << 20, 64})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
