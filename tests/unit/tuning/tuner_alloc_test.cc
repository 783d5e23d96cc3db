// Tuner::choose() runs on every collective call: it must not allocate. This binary counts the
// global operator new calls around it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/tuning/tuner.h"
#include "tuning_test_util.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// GCC 12 sees free() on what operator new returned once these inline into each other (in the
// sanitizer build) and warns; here they are the one matching pair.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace ccl::tune {
namespace {

TEST(TunerAllocations, ChooseAllocatesNothing) {
  const Tuner tuners[] = {
      Tuner(test::one_host(4, 1 << 20), default_figures(), Selection()),
      Tuner(test::many_hosts(2, 4), default_figures(), Selection::parse("allgather:tree", "")),
  };
  // The counter works: building a string allocates.
  const long before_check = g_allocations.load();
  (void)tuners[0].choose_explained(Collective::AllReduce, 1 << 20);
  EXPECT_GT(g_allocations.load(), before_check);

  const long before = g_allocations.load();
  double sink = 0;
  for (const Tuner& tuner : tuners) {
    for (Collective c : kCollectives) {
      for (size_t bytes = 0; bytes <= (size_t{1} << 30); bytes = bytes * 2 + 1) {
        sink += tuner.choose(c, bytes).predicted_us;  // includes a fallback (allgather)
      }
    }
  }
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_GT(sink, 0);
}

}  // namespace
}  // namespace ccl::tune
