// The host side of a device collective's call (algorithms/device): the time to build one rank's
// program, and the driver calls the executor queues for it (counters: batches of stream memory
// operations, copies, kernel launches, their total). On a GPU each driver call costs the host
// about 1-2 us (the queueing, not the work), so the total is what the host cost of a call on a
// CUDA stream is made of; scripts/device-check.sh measures that cost itself.
//
//   build/perf/device_program_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include "algorithms/device/device_collectives.h"

namespace dev = ccl::algo::device;

namespace {

// Arguments: ranks, bytes (of the call's count argument), collective (0 allreduce one-shot,
// 1 allreduce two-shot, 2 allgather, 3 reducescatter, 4 alltoall, 5 broadcast).
void BM_Program(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const uint64_t count = static_cast<uint64_t>(state.range(1)) / 4;
  const int which = static_cast<int>(state.range(2));
  const dev::Shape shape{n, 0, 4, 32ull << 20};  // the default CCL_CUDA_SCRATCH of 64 MiB
  auto build = [&] {
    switch (which) {
      case 0:
        return dev::all_reduce(shape, count, dev::AllReduceAlgorithm::OneShot, {});
      case 1:
        return dev::all_reduce(shape, count, dev::AllReduceAlgorithm::TwoShot, {});
      case 2:
        return dev::all_gather(shape, count, false);
      case 3:
        return dev::reduce_scatter(shape, count, {});
      case 4:
        return dev::all_to_all(shape, count, false);
      default:
        return dev::broadcast(shape, count, 0, false);
    }
  };
  for (auto _ : state) {
    dev::Program p = build();
    benchmark::DoNotOptimize(p);
  }
  const dev::DriverCalls calls = dev::driver_calls(build());
  state.counters["batches"] = static_cast<double>(calls.batches);
  state.counters["copies"] = static_cast<double>(calls.copies);
  state.counters["launches"] = static_cast<double>(calls.launches);
  state.counters["driver_calls"] = static_cast<double>(calls.total());
  static const char* names[] = {"allreduce one-shot", "allreduce two-shot", "allgather",
                                "reducescatter",      "alltoall",           "broadcast"};
  state.SetLabel(names[which]);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int which = 0; which < 6; ++which) {
    for (int n : {2, 8}) {
      for (int64_t bytes : {int64_t{8}, int64_t{1} << 20, int64_t{64} << 20}) {
        b->Args({n, bytes, which});
      }
    }
  }
}

BENCHMARK(BM_Program)->Apply(Shapes)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
