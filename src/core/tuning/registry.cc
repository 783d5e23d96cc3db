#include "core/tuning/registry.h"

#include <algorithm>
#include <array>
#include <vector>

#include "core/tuning/entries/entries.h"

namespace ccl::tune {

namespace {

// The table: one line per file of entries/. Their order here does not matter: each collective's
// entries are kept in the order of Algorithm.
constexpr std::span<const AlgorithmEntry> (*kEntryFiles[])() = {
    entries::direct,       entries::ring,         entries::tree,     entries::recursive_doubling,
    entries::rabenseifner, entries::hierarchical, entries::pairwise, entries::dissemination,
};

struct Index {
  std::vector<const AlgorithmEntry*> all;  // by collective, then by algorithm
  std::array<std::span<const AlgorithmEntry* const>, kNumCollectives> of{};
  std::array<std::array<const AlgorithmEntry*, kNumAlgorithms>, kNumCollectives> by{};

  Index() {
    for (auto file : kEntryFiles) {
      for (const AlgorithmEntry& e : file()) {
        by[static_cast<size_t>(e.collective)][static_cast<size_t>(e.algorithm)] = &e;
      }
    }
    std::array<size_t, kNumCollectives + 1> begin{};
    for (Collective c : kCollectives) {
      begin[static_cast<size_t>(c)] = all.size();
      for (const AlgorithmEntry* e : by[static_cast<size_t>(c)]) {
        if (e != nullptr) all.push_back(e);
      }
    }
    begin[kNumCollectives] = all.size();
    for (size_t c = 0; c < kNumCollectives; ++c) {
      of[c] =
          std::span<const AlgorithmEntry* const>(all.data() + begin[c], begin[c + 1] - begin[c]);
    }
  }
};

const Index& index() {
  static const Index instance;
  return instance;
}

}  // namespace

std::span<const AlgorithmEntry* const> registry() { return index().all; }

std::span<const AlgorithmEntry* const> entries_of(Collective collective) {
  const auto c = static_cast<size_t>(collective);
  return c < kNumCollectives ? index().of[c] : std::span<const AlgorithmEntry* const>{};
}

const AlgorithmEntry* find_entry(Collective collective, Algorithm algorithm) {
  const auto c = static_cast<size_t>(collective);
  const auto a = static_cast<size_t>(algorithm);
  return c < kNumCollectives && a < kNumAlgorithms ? index().by[c][a] : nullptr;
}

const char* unavailable(const AlgorithmEntry& entry, const Shape& shape, Protocol protocol,
                        size_t bytes) {
  if (protocol == Protocol::LL128) return "no LL128 on host memory";
  if (const char* why = entry.unavailable(shape, protocol, bytes)) return why;
  if (protocol == Protocol::Simple && !entry.chunk_free && shape.chunk_bytes == 0) {
    return "no chunk size";
  }
  return nullptr;
}

}  // namespace ccl::tune
