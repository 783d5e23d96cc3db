#include "core/tuning/tuner.h"

#include <charconv>
#include <cstdio>

#include "base/error.h"
#include "base/number_file.h"
#include "core/tuning/registry.h"

namespace ccl::tune {

namespace {

std::string format_us(double us) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.1f us", us);
  return buf;
}

const Shape& checked(const Shape& shape) {
  check_shape(shape);
  return shape;
}

const Figures& checked(const Figures& figures) {
  check_figures(figures, "tuner figures");
  return figures;
}

std::string pair_name(Algorithm a, Protocol p) {
  return std::string(algorithm_name(a)) + "/" + protocol_name(p);
}

}  // namespace

Tuner::Tuner(Shape shape, Figures figures, Selection selection)
    : shape_(checked(shape)),
      figures_(checked(figures)),
      selection_(selection),
      model_(shape_, figures_) {}

namespace {

// How much faster a later algorithm (declaration order: direct, ring, tree, ...) must be predicted
// before it displaces an earlier one. The closed-form model is only so exact: perf/algo_sweep.py
// on the 2-core VM found predictions within 0.1% of each other (Rabenseifner and the ring at 4
// ranks, 2-32 MiB) that were 15-25% apart when run, always in favour of the simpler schedule.
// Protocols of one algorithm compare strictly.
constexpr double kSwitchMargin = 0.15;

}  // namespace

Tuner::Ranking Tuner::rank(Collective c, size_t bytes, bool restricted) const {
  Ranking r;
  for (const AlgorithmEntry* entry : entries_of(c)) {
    const Algorithm a = entry->algorithm;
    if (restricted && !selection_.allows(c, a)) continue;
    for (Protocol p : kProtocols) {
      if (restricted && !selection_.allows(c, p)) continue;
      if (unavailable(*entry, shape_, p, bytes) != nullptr) continue;
      const double us =
          shape_.nranks == 1 ? 0.0 : entry->cost(model_, p, static_cast<double>(bytes));
      const Candidate x{entry, p, us};
      // Strictly faster only: on a tie the earlier (preferred) pair stays; another algorithm
      // must be faster by the margin.
      const double margin = r.count != 0 && a != r.best.entry->algorithm ? 1 + kSwitchMargin : 1;
      if (r.count == 0 || x.us * margin < r.best.us) {
        r.second = r.best;
        r.best = x;
      } else if (r.count == 1 || x.us < r.second.us) {
        r.second = x;
      }
      ++r.count;
    }
  }
  return r;
}

Choice Tuner::choice_of(const Candidate& best, bool fallback) const {
  Choice choice;
  choice.entry = best.entry;
  choice.algorithm = best.entry->algorithm;
  choice.protocol = best.protocol;
  // A chunk-free entry (the direct path) has no chunks; Simple selects its two-shot form there.
  choice.chunk_bytes =
      best.protocol == Protocol::Simple && !best.entry->chunk_free ? shape_.chunk_bytes : 0;
  choice.predicted_us = best.us;
  choice.fallback = fallback;
  return choice;
}

Choice Tuner::choose(Collective c, size_t bytes) const {
  const Ranking r = rank(c, bytes, true);
  if (r.count > 0) return choice_of(r.best, false);
  // Every collective has an entry available everywhere at LL (ring, pairwise, dissemination),
  // so the unrestricted ranking is never empty (a registry test checks).
  return choice_of(rank(c, bytes, false).best, true);
}

Choice Tuner::choose_explained(Collective c, size_t bytes) const {
  Ranking r = rank(c, bytes, true);
  const bool fallback = r.count == 0;
  if (fallback) r = rank(c, bytes, false);
  Choice choice = choice_of(r.best, fallback);
  std::string why =
      pair_name(r.best.entry->algorithm, r.best.protocol) + " " + format_us(r.best.us);
  if (r.count == 1) {
    why += fallback ? " (the only one available)" : " (the only one allowed and available)";
  } else {
    why += r.best.us < r.second.us ? " < " : " = ";
    why += pair_name(r.second.entry->algorithm, r.second.protocol) + " " + format_us(r.second.us) +
           " (next best)";
  }
  if (fallback) {
    why = std::string("CCL_ALGO/CCL_PROTO allow nothing available for ") + collective_name(c) +
          " at " + std::to_string(bytes) + " B; using " + why;
  }
  choice.reason = std::move(why);
  return choice;
}

std::string Tuner::cost_table(Collective c, size_t bytes) const {
  const Choice chosen = choose_explained(c, bytes);
  char line[256];
  snprintf(line, sizeof(line),
           "tune %s %zu B: %d ranks on %d host(s) (up to %d per host%s, %s, window %zu B, "
           "chunk %zu B)\n",
           collective_name(c), bytes, shape_.nranks, shape_.nhosts, shape_.ranks_per_host,
           shape_.uniform_hosts ? "" : ", not uniform", shape_.shm ? "shm" : "no shm",
           shape_.window_bytes, shape_.chunk_bytes);
  std::string table = line;
  for (const AlgorithmEntry* entry : entries_of(c)) {
    const Algorithm a = entry->algorithm;
    for (Protocol p : kProtocols) {
      const char* why = nullptr;
      const std::optional<double> us = model_.predict_us(c, a, p, bytes, &why);
      std::string cell;
      if (!us) {
        cell = std::string("n/a: ") + why;
      } else if (!selection_.allows(c, a)) {
        cell = format_us(*us) + " excluded by CCL_ALGO";
      } else if (!selection_.allows(c, p)) {
        cell = format_us(*us) + " excluded by CCL_PROTO";
      } else {
        cell = format_us(*us);
        if (a == chosen.algorithm && p == chosen.protocol) cell += "  <- chosen";
      }
      snprintf(line, sizeof(line), "  %-26s %s\n", pair_name(a, p).c_str(), cell.c_str());
      table += line;
    }
  }
  table += "  choice: " + chosen.reason + "\n";
  return table;
}

// ---- the figures file ----

namespace {

struct Key {
  const char* name;
  double Figures::*top;        // reduce_gbps
  LinkFigures Figures::*link;  // or a link's field
  double LinkFigures::*field;
  bool is_alpha;
};

constexpr Key kKeys[] = {
    {"shm.alpha_us", nullptr, &Figures::shm, &LinkFigures::alpha_us, true},
    {"shm.beta_gbps", nullptr, &Figures::shm, &LinkFigures::beta_gbps, false},
    {"net.alpha_us", nullptr, &Figures::net, &LinkFigures::alpha_us, true},
    {"net.beta_gbps", nullptr, &Figures::net, &LinkFigures::beta_gbps, false},
    {"direct.alpha_us", nullptr, &Figures::direct, &LinkFigures::alpha_us, true},
    {"direct.beta_gbps", nullptr, &Figures::direct, &LinkFigures::beta_gbps, false},
    {"reduce_gbps", &Figures::reduce_gbps, nullptr, nullptr, false},
};
constexpr size_t kNumKeys = sizeof(kKeys) / sizeof(kKeys[0]);

double& field_of(Figures& f, const Key& key) {
  return key.top != nullptr ? f.*(key.top) : (f.*(key.link)).*(key.field);
}

}  // namespace

Figures read_figures_file(const std::string& path) {
  Figures figures = default_figures();
  const char* names[kNumKeys];
  for (size_t k = 0; k < kNumKeys; ++k) names[k] = kKeys[k].name;
  read_number_file(path, "tuner figures file", names, [&](size_t k, double v) -> const char* {
    if (kKeys[k].is_alpha ? v < 0 : v <= 0) {
      return kKeys[k].is_alpha ? "alpha must be >= 0" : "a bandwidth must be > 0";
    }
    field_of(figures, kKeys[k]) = v;
    return nullptr;
  });
  return figures;
}

std::string format_figures(const Figures& figures) {
  std::string out =
      "# ccl tuner figures: alpha in microseconds per step, beta and reduce in GB/s (1e9 B/s)\n";
  Figures copy = figures;
  for (const Key& key : kKeys) {
    char value[64];
    // Shortest form that reads back as the same double.
    const auto result = std::to_chars(value, value + sizeof(value), field_of(copy, key));
    out += key.name;
    out += ' ';
    out.append(value, result.ptr);
    out += '\n';
  }
  return out;
}

}  // namespace ccl::tune
