// What a copy costs on this machine, for the broadcast's bounds (perf/README.md, "Broadcast and
// the allreduce margins"): memcpy by one thread and by two at once (the memory bandwidth the two
// cores share), and the kernel's cross-memory-attach copy (process_vm_readv, here from this
// process itself), which pins every page it touches. Bytes per second are summed over threads.
//
//   build/perf/copy_bench --benchmark_filter='1048576|67108864'
#include <benchmark/benchmark.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace {

struct Buffers {
  explicit Buffers(size_t bytes)
      : src(static_cast<char*>(std::aligned_alloc(4096, bytes))),
        dst(static_cast<char*>(std::aligned_alloc(4096, bytes))) {
    std::memset(src.get(), 1, bytes);
    std::memset(dst.get(), 2, bytes);
  }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> src, dst;
};

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  Buffers b(bytes);
  for (auto _ : state) {
    std::memcpy(b.dst.get(), b.src.get(), bytes);
    benchmark::DoNotOptimize(b.dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_ProcessVmReadv(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  Buffers b(bytes);
  iovec to{b.dst.get(), bytes};
  iovec from{b.src.get(), bytes};
  for (auto _ : state) {
    if (process_vm_readv(getpid(), &to, 1, &from, 1, 0) != static_cast<ssize_t>(bytes)) {
      state.SkipWithError("process_vm_readv failed (ptrace rules, Yama?)");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

}  // namespace

BENCHMARK(BM_Memcpy)->Arg(1 << 20)->Arg(64 << 20)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_ProcessVmReadv)->Arg(1 << 20)->Arg(64 << 20)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK_MAIN();
