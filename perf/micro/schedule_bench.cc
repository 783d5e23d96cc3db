// Schedules cheap at scale (docs/design-notes.md, "Schedules"): building one rank's ring and
// double-binary-tree allreduce schedule for 16,384 ranks, as `ccl-sim` will for every rank it
// replays. Target: < 50 ms and < 64 MiB per schedule.
//   build-dir/perf/schedule_bench [--benchmark_filter=ring]
//
// Parameters: nranks 16,384 (and 1,024 for scale), identity order, float elements, counts and
// chunking as the communicator passes them (comm_collectives.cc: chunk_elems = chunk_bytes /
// elem_size, where chunk_bytes is CCL_BUFFSIZE / 4 = 1 MiB by default for the Simple protocol and
// 0 for LL, which the tuner picks for small messages):
//   large: count 256 Mi floats (1 GiB), chunk_elems 262,144 (Simple, CCL_BUFFSIZE = 4 MiB)
//   mid:   count 4 Mi floats (16 MiB),  chunk_elems 262,144
//   small: count 1 Ki floats (4 KiB),   chunk_elems 0 (LL: no chunking)
// Ranks: 0 (the first tree's root) and 12,345 (an inner node of one tree, a leaf of the other).
//
// Counters: `bytes`, the heap the schedule owns (Schedule::memory_bytes()); `peak_bytes`, the
// most heap live at once while building it (temporaries included), counted by replacing the
// global operator new/delete in this binary; `steps` and `rounds`, its size. `walk/...` reads
// every step of the large schedule once, as the executor does (items/s: steps per second).
//
// Results (16,384 ranks, rank 12,345, large; medians of 5, 2 loaded cores), before and after the
// compact encoding (schedule.h): ring 6-8 ms, 5.25 MiB -> 0.9-1.4 ms, 2.1 MiB; double binary tree
// 0.10 ms, 0.31 MiB (0.33 MiB peak) -> 0.05 ms, 0.13 MiB (0.13 MiB peak). Target: < 50 ms and
// < 64 MiB, met by both before and after.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "algorithms/double_binary_tree.h"
#include "algorithms/ring.h"

namespace {

// Live and peak heap bytes of this process. Every allocation carries its size in a header that
// keeps max_align_t alignment, so delete needs no sized overload.
std::atomic<size_t> g_live{0};
std::atomic<size_t> g_peak{0};
constexpr size_t kHeader = alignof(std::max_align_t);

void* counted_alloc(size_t size) {
  void* raw = std::malloc(size + kHeader);
  if (raw == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(raw) = size;
  const size_t live = g_live.fetch_add(size, std::memory_order_relaxed) + size;
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return static_cast<char*>(raw) + kHeader;
}

void counted_free(void* p) {
  if (p == nullptr) return;
  void* raw = static_cast<char*>(p) - kHeader;
  g_live.fetch_sub(*static_cast<size_t*>(raw), std::memory_order_relaxed);
  std::free(raw);
}

}  // namespace

void* operator new(size_t size) { return counted_alloc(size); }
void* operator new[](size_t size) { return counted_alloc(size); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }

namespace {

using ccl::algo::Schedule;
using ccl::algo::ScheduleParams;

constexpr size_t kChunkElems = (size_t{4} << 20) / 4 / sizeof(float);  // CCL_BUFFSIZE / 4

struct Case {
  const char* name;
  size_t count;
  size_t chunk_elems;
};
const Case kCases[] = {
    {"large_256Mi", size_t{256} << 20, kChunkElems},
    {"mid_4Mi", size_t{4} << 20, kChunkElems},
    {"small_1Ki", size_t{1} << 10, 0},
};

using Builder = Schedule (*)(const ScheduleParams&);

// Arguments: nranks, rank.
ScheduleParams params_of(const benchmark::State& state, Case c) {
  ScheduleParams params;
  params.nranks = static_cast<int>(state.range(0));
  params.rank = static_cast<int>(state.range(1));
  params.count = c.count;
  params.chunk_elems = c.chunk_elems;
  return params;
}

void bm_build(benchmark::State& state, Builder build, Case c) {
  const ScheduleParams params = params_of(state, c);
  for (auto _ : state) {
    Schedule s = build(params);
    benchmark::DoNotOptimize(s);
  }
  // One more build, outside the timed loop, to count its memory.
  const size_t live_before = g_live.load();
  g_peak.store(live_before);
  const Schedule s = build(params);
  state.counters["bytes"] =
      benchmark::Counter(static_cast<double>(s.memory_bytes()), benchmark::Counter::kDefaults,
                         benchmark::Counter::kIs1024);
  state.counters["peak_bytes"] =
      benchmark::Counter(static_cast<double>(g_peak.load() - live_before),
                         benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
  state.counters["steps"] = static_cast<double>(s.step_count());
  state.counters["rounds"] = static_cast<double>(s.round_count());
}

// What the executor does with a schedule, minus the transport: every step of every round, read
// in order. Time per step is the executor's own overhead on top of posting the requests.
void bm_walk(benchmark::State& state, Builder build, Case c) {
  const ScheduleParams params = params_of(state, c);
  const Schedule s = build(params);
  for (auto _ : state) {
    size_t sum = 0;
    for (const Schedule::Round round : s.rounds()) {
      for (const ccl::algo::Step step : round) {
        sum += step.src.offset + step.dst.offset + step.dst.count + static_cast<size_t>(step.peer);
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * s.step_count()));
}

void register_all() {
  const struct {
    const char* name;
    Builder build;
  } builders[] = {{"ring_allreduce", ccl::algo::ring_allreduce},
                  {"double_binary_tree_allreduce", ccl::algo::double_binary_tree_allreduce}};
  for (const auto& b : builders) {
    for (const Case& c : kCases) {
      const std::string name = std::string(b.name) + "/" + c.name;
      benchmark::RegisterBenchmark(name.c_str(), bm_build, b.build, c)
          ->ArgNames({"nranks", "rank"})
          ->Args({16384, 0})
          ->Args({16384, 12345})
          ->Args({1024, 345})
          ->Unit(benchmark::kMillisecond);
    }
    const std::string walk = std::string("walk/") + b.name + "/" + kCases[0].name;
    benchmark::RegisterBenchmark(walk.c_str(), bm_walk, b.build, kCases[0])
        ->ArgNames({"nranks", "rank"})
        ->Args({16384, 12345})
        ->Unit(benchmark::kMicrosecond);
  }
}

// Registered before main runs (the names are built at run time).
[[maybe_unused]] const bool kRegistered = (register_all(), true);

}  // namespace

BENCHMARK_MAIN();
