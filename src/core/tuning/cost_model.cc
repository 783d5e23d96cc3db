#include "core/tuning/cost_model.h"

#include <algorithm>
#include <cmath>

#include "algorithms/double_binary_tree.h"
#include "base/error.h"
#include "core/tuning/registry.h"

namespace ccl::tune {

// Notation for the formulas below: n ranks, H hosts, L ranks per host, S bytes (the
// collective's `bytes`, algo_selection.h), c the Simple chunk, K the number of chunks of a piece
// (1 for LL, ceil(piece / c) for Simple), h = ceil(log2 n), the depth of the binary trees. A link
// has a per-step latency a and a rate b (bytes per us): a step of x bytes costs a + x/b; g is the
// reduce rate: reducing x bytes costs x/g. Links: I = shm inside a host (net when shm is off), N =
// net between hosts, F = the link a flat algorithm runs at (I on one host, else the slowest of I
// and N: its rounds are paced by the slowest hop), W = the direct window (a = one synchronisation,
// b = copy rate). N/L: the net link shared by the L ranks of a host that cross hosts at the same
// time (one network link per host). Rank-local copies common to every algorithm are left out.
//
// Where a formula mixes the pipeline form (D + K - 1)(a + q/b) with a rank's total bytes, it is
// the same thing: K chunks of q bytes cross a path of depth D one round behind each other.
// The ring, allgather and reduce-scatter schedules run step by step (the K chunks of step s all
// go before step s+1, ring.cc), and every link carries one chunk per round, so their Simple form
// only adds latency: K a per step. Chunking pays off only in the chain and the trees, where it
// turns depth x (time of the message) into (depth + K) x (time of a chunk).

namespace {

constexpr double kBytesPerUsPerGbps = 1e3;  // 1 GB/s = 1e9 B/s = 1e3 B/us

int ceil_log2(int n) {
  int h = 0;
  while ((1 << h) < n) ++h;
  return h;
}

int floor_pow2(int n) {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

}  // namespace

namespace {

CostModel::Link link(const LinkFigures& f) {
  return {f.alpha_us, 1.0 / (f.beta_gbps * kBytesPerUsPerGbps)};
}

CostModel::Link slowest(CostModel::Link x, CostModel::Link y) {
  return {std::max(x.a, y.a), std::max(x.inv, y.inv)};
}

}  // namespace

CostModel::CostModel(const Shape& shape, const Figures& f) : shape_(shape) {
  Terms& t = terms_;
  t.n = shape.nranks;
  t.chunk_bytes = static_cast<double>(shape.chunk_bytes);
  t.intra = link(shape.shm ? f.shm : f.net);
  t.net = link(f.net);
  t.flat = shape.nhosts == 1 ? t.intra : slowest(t.intra, t.net);
  t.direct = link(f.direct);
  t.fold = t.flat;  // the n - p extra ranks of a power-of-two fold, paired with rank r - p
  t.reduce_inv = 1.0 / (f.reduce_gbps * kBytesPerUsPerGbps);
  t.tree_height = ceil_log2(shape.nranks);
  for (int r = 0; r < shape.nranks; ++r) {
    double sent = 0, reduced = 0;
    for (int tree = 0; tree < 2; ++tree) {
      const algo::TreeLinks links = algo::double_binary_tree_links(shape.nranks, r, tree);
      for (int child : links.children) reduced += child >= 0;
      sent += (links.parent >= 0);
    }
    sent += reduced;
    t.tree_sent_halves = std::max(t.tree_sent_halves, sent);
    t.tree_reduced_halves = std::max(t.tree_reduced_halves, reduced);
  }
  const int p = floor_pow2(shape.nranks);
  t.pow2 = p;
  // Partners r and r^d at distance d. With ranks placed host by host (rank r on host r / L),
  // the pair shares a host when 2d divides L; else every rank of the host crosses at once and
  // they share its network link (N/L).
  const int L = shape.ranks_per_host;
  const Link shared_net{t.net.a, t.net.inv * L};
  for (int d = 1; d < p; d *= 2) {
    const bool same_host = shape.nhosts == 1 || (shape.uniform_hosts && L % (2 * d) == 0);
    const Link at = same_host ? t.intra : shared_net;
    t.log2_pow2 += 1;
    t.rd_a += at.a;
    t.rd_inv += at.inv;
    t.rab_a += 2 * at.a;
    t.rab_inv += 2 * at.inv * d / p;
  }
}

double CostModel::Terms::chunks(double piece, Protocol protocol) const {
  if (protocol != Protocol::Simple) return 1.0;
  return std::max(1.0, std::ceil(piece / chunk_bytes));
}

// The 2-core test VM (measured on it, DESIGN.md "Physical limits" and docs/design-notes.md):
// - direct: a 2-rank 8-byte one-shot allreduce takes 0.37 us, nearly all of it the flag
//   exchange (alpha 0.4); memcpy of large buffers runs at ~12 GB/s on one core (beta 12).
// - shm: a ring step is a message with a slot header, two shared counters and a wake-up check:
//   a few us when each rank has a core (alpha 3); a 64 MiB chain broadcast through the slot
//   rings reaches ~9 GB/s (beta 8: two copies per byte, overlapped).
// - net: tcp over loopback: a system call and a poll wake-up on each side (alpha 25), ~3 GB/s
//   through the kernel's socket buffers (beta 3).
// - reduce: a sum reads two streams and writes one, 3 bytes of memory traffic per byte reduced
//   against memcpy's 2, so about 2/3 of the copy rate (8 GB/s).
// Ranks outnumbering cores make every alpha larger; a probe measures that, these do not.
Figures default_figures() {
  Figures f;
  f.shm = {3.0, 8.0};
  f.net = {25.0, 3.0};
  f.direct = {0.4, 12.0};
  f.reduce_gbps = 8.0;
  return f;
}

void check_figures(const Figures& f, const char* where) {
  const auto check_link = [&](const LinkFigures& l, const char* name) {
    if (!std::isfinite(l.alpha_us) || l.alpha_us < 0) {
      throw_error(cclInvalidArgument, "%s: %s.alpha_us must be >= 0, not %g", where, name,
                  l.alpha_us);
    }
    if (!std::isfinite(l.beta_gbps) || l.beta_gbps <= 0) {
      throw_error(cclInvalidArgument, "%s: %s.beta_gbps must be > 0, not %g", where, name,
                  l.beta_gbps);
    }
  };
  check_link(f.shm, "shm");
  check_link(f.net, "net");
  check_link(f.direct, "direct");
  if (!std::isfinite(f.reduce_gbps) || f.reduce_gbps <= 0) {
    throw_error(cclInvalidArgument, "%s: reduce_gbps must be > 0, not %g", where, f.reduce_gbps);
  }
}

void check_shape(const Shape& s) {
  // The model's integer arithmetic (1 << ceil(log2 n)) stays exact far beyond this.
  constexpr int kMaxRanks = 1 << 24;
  if (s.nranks < 1 || s.nranks > kMaxRanks) {
    throw_error(cclInvalidArgument, "tuner shape: nranks %d out of [1, %d]", s.nranks, kMaxRanks);
  }
  if (s.nhosts < 1 || s.nhosts > s.nranks) {
    throw_error(cclInvalidArgument, "tuner shape: nhosts %d out of [1, nranks %d]", s.nhosts,
                s.nranks);
  }
  if (s.ranks_per_host < 1 || s.ranks_per_host > s.nranks ||
      static_cast<long>(s.ranks_per_host) * s.nhosts < s.nranks) {
    throw_error(cclInvalidArgument,
                "tuner shape: ranks_per_host %d cannot hold %d ranks on %d hosts (max per host)",
                s.ranks_per_host, s.nranks, s.nhosts);
  }
  if (s.uniform_hosts && static_cast<long>(s.ranks_per_host) * s.nhosts != s.nranks) {
    throw_error(cclInvalidArgument,
                "tuner shape: uniform hosts, but %d hosts x %d ranks != %d ranks", s.nhosts,
                s.ranks_per_host, s.nranks);
  }
}

std::optional<double> CostModel::predict_us(Collective c, Algorithm a, Protocol p, size_t bytes,
                                            const char** why) const {
  const AlgorithmEntry* entry = find_entry(c, a);
  const char* reason = entry == nullptr ? "no such algorithm for this collective"
                                        : unavailable(*entry, shape_, p, bytes);
  if (why != nullptr) *why = reason;
  if (reason != nullptr) return std::nullopt;
  if (shape_.nranks == 1) return 0.0;  // every algorithm is the same local copy
  return entry->cost(*this, p, static_cast<double>(bytes));
}

std::optional<double> predict_us(Collective c, Algorithm a, Protocol p, size_t bytes,
                                 const Shape& shape, const Figures& figures, const char** why) {
  return CostModel(shape, figures).predict_us(c, a, p, bytes, why);
}

}  // namespace ccl::tune
