// The algorithm registry (core/tuning/registry.h): every entry is well formed, every collective
// always has something to run, and the tuner walks exactly the registry's entries.
#include "core/tuning/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/tuning/tuner.h"

namespace ccl::tune {
namespace {

Shape one_host(int n, size_t window) {
  Shape s;
  s.nranks = n;
  s.ranks_per_host = n;
  s.window_bytes = window;
  s.chunk_bytes = 1 << 20;
  return s;
}

Shape two_hosts(int per_host) {
  Shape s;
  s.nranks = 2 * per_host;
  s.nhosts = 2;
  s.ranks_per_host = per_host;
  s.chunk_bytes = 1 << 20;
  return s;
}

TEST(Registry, EntriesAreWellFormedAndIndexed) {
  std::set<std::pair<int, int>> seen;
  for (const AlgorithmEntry* e : registry()) {
    ASSERT_NE(e, nullptr);
    EXPECT_NE(e->unavailable, nullptr);
    EXPECT_NE(e->cost, nullptr);
    EXPECT_TRUE((e->build == nullptr) != (e->run == nullptr))
        << collective_name(e->collective) << "/" << algorithm_name(e->algorithm)
        << ": exactly one of build and run";
    EXPECT_TRUE(
        seen.emplace(static_cast<int>(e->collective), static_cast<int>(e->algorithm)).second)
        << "one entry per (collective, algorithm)";
    EXPECT_EQ(find_entry(e->collective, e->algorithm), e);
  }
  size_t total = 0;
  for (Collective c : kCollectives) {
    const auto of = entries_of(c);
    total += of.size();
    for (size_t i = 0; i < of.size(); ++i) {
      EXPECT_EQ(of[i]->collective, c);
      if (i > 0) {
        EXPECT_LT(of[i - 1]->algorithm, of[i]->algorithm) << "the order of Algorithm";
      }
    }
  }
  EXPECT_EQ(total, registry().size());
  // The direct shared-window collectives are entries too.
  for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                       Collective::AllGather, Collective::AlltoAll, Collective::Barrier}) {
    const AlgorithmEntry* e = find_entry(c, Algorithm::Direct);
    ASSERT_NE(e, nullptr) << collective_name(c);
    EXPECT_NE(e->run, nullptr);
  }
  EXPECT_EQ(find_entry(Collective::ReduceScatter, Algorithm::Direct), nullptr);
  EXPECT_EQ(find_entry(Collective::Barrier, Algorithm::Ring), nullptr);
}

// Whatever the shape, size and protocol restriction, every collective has an entry that runs at
// LL, so the tuner's unrestricted ranking is never empty.
TEST(Registry, EveryCollectiveAlwaysHasSomethingToRun) {
  for (const Shape& s : {one_host(1, 0), one_host(2, 1 << 20), one_host(7, 0), two_hosts(3)}) {
    for (Collective c : kCollectives) {
      for (size_t bytes : {size_t{0}, size_t{8}, size_t{1} << 30}) {
        bool any = false;
        for (const AlgorithmEntry* e : entries_of(c)) {
          any |= unavailable(*e, s, Protocol::LL, bytes) == nullptr;
        }
        EXPECT_TRUE(any) << collective_name(c) << " " << bytes << " B on " << s.nranks << " ranks";
      }
    }
  }
}

// CCL_ALGO naming one entry's algorithm makes the tuner choose that very entry wherever it is
// available; the choice carries the entry the communicator runs.
TEST(Registry, ForcingEachEntryChoosesIt) {
  const Shape shapes[] = {one_host(4, 1 << 20), two_hosts(2)};
  for (const Shape& s : shapes) {
    for (const AlgorithmEntry* e : registry()) {
      const std::string algo =
          std::string(collective_name(e->collective)) + ":" + algorithm_name(e->algorithm);
      const Tuner tuner(s, default_figures(), Selection::parse(algo, ""));
      for (size_t bytes : {size_t{8}, size_t{4096}}) {
        bool available = false;
        for (Protocol p : kProtocols) available |= unavailable(*e, s, p, bytes) == nullptr;
        const Choice choice = tuner.choose(e->collective, bytes);
        ASSERT_NE(choice.entry, nullptr);
        if (available) {
          EXPECT_EQ(choice.entry, e) << algo << " " << bytes << " B on " << s.nhosts << " host(s)";
          EXPECT_FALSE(choice.fallback);
        } else {
          EXPECT_TRUE(choice.fallback) << algo;
        }
        EXPECT_EQ(choice.entry->collective, e->collective);
        EXPECT_EQ(choice.algorithm, choice.entry->algorithm);
      }
    }
  }
}

TEST(Registry, CostTableListsTheCollectivesEntries) {
  const Tuner tuner(one_host(4, 1 << 20), default_figures(), Selection());
  for (Collective c : kCollectives) {
    const std::string table = tuner.cost_table(c, 4096);
    for (const AlgorithmEntry* e : entries_of(c)) {
      EXPECT_NE(table.find(std::string(algorithm_name(e->algorithm)) + "/"), std::string::npos)
          << table;
    }
    EXPECT_NE(table.find("<- chosen"), std::string::npos) << table;
  }
}

}  // namespace
}  // namespace ccl::tune
