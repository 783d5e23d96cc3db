#include "core/tuning/cost_model.h"

#include <algorithm>
#include <cmath>

#include "algorithms/double_binary_tree.h"
#include "core/error.h"

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
// The direct broadcast and allgather move data in pieces of this size, the receivers' copies
// overlapping the writer's (DirectCollectives::kBroadcastPiece, algorithms/direct.h).
constexpr double kDirectPiece = 64 * 1024;

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

CostModel::Link CostModel::link(const LinkFigures& f) {
  return {f.alpha_us, 1.0 / (f.beta_gbps * kBytesPerUsPerGbps)};
}

CostModel::CostModel(const Shape& shape, const Figures& f)
    : shape_(shape),
      n_(shape.nranks),
      intra_(link(shape.shm ? f.shm : f.net)),
      net_(link(f.net)),
      flat_(shape.nhosts == 1 ? intra_ : slowest(intra_, net_)),
      direct_(link(f.direct)),
      // The n - p extra ranks of a power-of-two fold, paired with rank r - p.
      fold_(flat_),
      reduce_inv_(1.0 / (f.reduce_gbps * kBytesPerUsPerGbps)),
      tree_height_(ceil_log2(shape.nranks)) {
  for (int r = 0; r < shape.nranks; ++r) {
    double sent = 0, reduced = 0;
    for (int tree = 0; tree < 2; ++tree) {
      const algo::TreeLinks links = algo::double_binary_tree_links(shape.nranks, r, tree);
      for (int child : links.children) reduced += child >= 0;
      sent += (links.parent >= 0);
    }
    sent += reduced;
    tree_sent_halves_ = std::max(tree_sent_halves_, sent);
    tree_reduced_halves_ = std::max(tree_reduced_halves_, reduced);
  }
  const int p = floor_pow2(shape.nranks);
  pow2_ = p;
  // Partners r and r^d at distance d. With ranks placed host by host (rank r on host r / L),
  // the pair shares a host when 2d divides L; else every rank of the host crosses at once and
  // they share its network link (N/L).
  const int L = shape.ranks_per_host;
  const Link shared_net{net_.a, net_.inv * L};
  for (int d = 1; d < p; d *= 2) {
    const bool same_host = shape.nhosts == 1 || (shape.uniform_hosts && L % (2 * d) == 0);
    const Link at = same_host ? intra_ : shared_net;
    log2_pow2_ += 1;
    rd_a_ += at.a;
    rd_inv_ += at.inv;
    rab_a_ += 2 * at.a;
    rab_inv_ += 2 * at.inv * d / p;
  }
}

// K: 1 for LL, ceil(piece / c) for Simple.
double CostModel::chunks(double piece, Protocol protocol) const {
  if (protocol != Protocol::Simple) return 1.0;
  return std::max(1.0, std::ceil(piece / static_cast<double>(shape_.chunk_bytes)));
}

// ---- allreduce ----

// Direct one-shot (LL): a rank copies its S into its mailbox (S/b), raises its flag and waits
// for the others' (one synchronisation, a), then reads and reduces the n-1 peers' vectors:
//   a_W + S/b_W + (n-1) S/g
double CostModel::allreduce_one_shot(double S) const {
  return direct_.step(S) + (n_ - 1) * reduce(S);
}

// Direct two-shot (Simple): copy in (S/b), synchronise, reduce the own 1/n of all n vectors
// ((n-1)/n S reduced), synchronise, copy the other n-1 reduced pieces out:
//   2 a_W + S/b_W + (n-1)/n S/g + (n-1)/n S/b_W
double CostModel::allreduce_two_shot(double S) const {
  const double rest = (n_ - 1) * S / n_;
  return direct_.a + direct_.step(S) + reduce(rest) + rest * direct_.inv;
}

// Ring (ring.h): reduce-scatter then allgather, 2(n-1) steps, each moving a piece p = S/n (in
// K chunks), the first n-1 also reducing it:
//   2(n-1) (K a_F + p/b_F) + (n-1) p/g
double CostModel::allreduce_ring(double S, Protocol protocol) const {
  const double p = S / n_;
  const double K = chunks(p, protocol);
  return 2 * (n_ - 1) * (K * flat_.a + p * flat_.inv) + (n_ - 1) * reduce(p);
}

// Double binary tree (double_binary_tree.h): each half S/2 goes up one tree and down again, in
// K chunks of q = S/(2K). Depth D = 3h rounds (h edges up, up to h more where a node reduces its
// two children one per round, h edges down; the header's "about K + 3h rounds"); the chunks
// follow one round apart, so R = D + K - 1 rounds. The busiest rank sends E halves (a half to its
// parent and one to each child, in each tree: up to 4, so 2S, for large n; 2, so S, for n = 2,
// like the ring) plus the pipeline fill, (D - 1) q, and reduces C halves (one per child):
//   (D + K - 1) a_F + (E S/2 + (D-1) q)/b_F + C S/2 /g
double CostModel::allreduce_tree(double S, Protocol protocol) const {
  const double D = 3 * tree_height_;
  const double half = S / 2;
  const double K = chunks(half, protocol);
  const double q = half / K;
  return (D + K - 1) * flat_.a + (tree_sent_halves_ * half + (D - 1) * q) * flat_.inv +
         reduce(tree_reduced_halves_ * half);
}

// Recursive doubling (recursive_doubling.h), p = 2^floor(log2 n): log2 p rounds in which
// partners at distance d = 1, 2, ..., p/2 swap the whole vector and both reduce; n > p adds a
// fold round before (S in, reduced) and one after (S back), at the flat link:
//   sum_d (a_d + S/b_d) + (log2 p + [n>p]) S/g + [n>p] 2 (a_F + S/b_F)
double CostModel::allreduce_recursive_doubling(double S) const {
  const double t = rd_a_ + S * rd_inv_ + log2_pow2_ * reduce(S);
  return n_ > pow2_ ? t + 2 * fold_.step(S) + reduce(S) : t;
}

// Rabenseifner (rabenseifner.h): reduce-scatter by recursive halving (distance d = p/2 ... 1
// moves S d/p and reduces it), then allgather by recursive doubling (the same sizes back), the
// fold as in recursive doubling:
//   sum_d 2 (a_d + (S d/p)/b_d) + (p-1)/p S/g + [n>p] (2 (a_F + S/b_F) + S/g)
double CostModel::allreduce_rabenseifner(double S) const {
  const double t = rab_a_ + S * rab_inv_ + reduce(S * (pow2_ - 1) / pow2_);
  return n_ > pow2_ ? t + 2 * fold_.step(S) + reduce(S) : t;
}

// Hierarchical: a ring reduce-scatter among the L ranks of a host (L-1 steps of SL = S/L, each
// reduced), then L concurrent ring allreduces of SL among the H hosts (rank i of every host
// with rank i of the others; 2(H-1) steps of SL/H, all L sharing the host's network link), then a
// ring allgather inside the host (L-1 steps of SL). K1 = chunks of SL, K2 = chunks of SL/H:
//   (L-1)(K1 a_I + SL/b_I + SL/g) + 2(H-1)(K2 a_N + SL/H / (b_N/L)) + (H-1) SL/H /g
//   + (L-1)(K1 a_I + SL/b_I)
double CostModel::allreduce_hierarchical(double S, Protocol protocol) const {
  const double L = shape_.ranks_per_host, H = shape_.nhosts;
  const double SL = S / L, SH = SL / H;
  const double K1 = chunks(SL, protocol), K2 = chunks(SH, protocol);
  const double intra_step = K1 * intra_.a + SL * intra_.inv;
  const double inter = 2 * (H - 1) * (K2 * net_.a + SH * net_.inv * L) + (H - 1) * reduce(SH);
  return (L - 1) * (intra_step + reduce(SL)) + inter + (L - 1) * intra_step;
}

// ---- broadcast, reduce ----

// Direct broadcast: the root copies S into its mailbox in pieces, the others copy each piece out
// as soon as it is flagged, so the copies overlap but for one piece:
//   a_W + (S + min(S, piece))/b_W
double CostModel::broadcast_direct(double S) const {
  return direct_.step(S + std::min(S, kDirectPiece));
}

// Chain (ring.h chain_broadcast, chain_reduce.h): K chunks of q = S/K, one hop per round, n-1
// hops, each hop of a reduce also reducing the chunk:
//   broadcast (n-1 + K-1)(a_F + q/b_F)        reduce (n-1 + K-1)(a_F + q/b_F + q/g)
double CostModel::chain(double S, Protocol protocol, bool reducing) const {
  const double K = chunks(S, protocol);
  const double q = S / K;
  return (n_ - 1 + K - 1) * (flat_.step(q) + (reducing ? reduce(q) : 0.0));
}

// One binary tree with the root on top (tree_rooted.h), h = ceil(log2 n) edges deep, K chunks
// of q one round apart. Broadcast: a chunk moves one edge per round, an inner rank sends it to its
// two children; reduce: an inner rank receives a chunk from each child one round apart (two
// children of equal height cost a round each per level: depth 2h) and reduces both, so in
// steady state it takes in 2q per round:
//   broadcast (h + K-1)(a_F + 2q/b_F)         reduce (2h + K-1)(a_F + 2q/b_F + 2q/g)
double CostModel::rooted_tree(double S, Protocol protocol, bool reducing) const {
  const double K = chunks(S, protocol);
  const double q = S / K;
  const double depth = reducing ? 2 * tree_height_ : tree_height_;
  return (depth + K - 1) * (flat_.step(2 * q) + (reducing ? reduce(2 * q) : 0.0));
}

// ---- allgather, reducescatter (S = one rank's piece) ----

// Direct allgather: each rank publishes its S in pieces and copies the n-1 others' out,
// overlapping all but one piece:  a_W + ((n-1) S + min(S, piece))/b_W
double CostModel::allgather_direct(double S) const {
  return direct_.step((n_ - 1) * S + std::min(S, kDirectPiece));
}

// Ring allgather: n-1 steps of S (in K chunks):  (n-1)(K a_F + S/b_F)
// Ring reduce-scatter: n-1 steps of S, each reduced:  (n-1)(K a_F + S/b_F + S/g)
double CostModel::ring_pieces(double S, Protocol protocol, bool reducing) const {
  const double K = chunks(S, protocol);
  return (n_ - 1) * (K * flat_.a + S * flat_.inv + (reducing ? reduce(S) : 0.0));
}

namespace {

// Why (collective, algorithm, protocol) cannot run, or nullptr when it can.
const char* unavailable(Collective c, Algorithm a, Protocol p, size_t bytes, const Shape& s) {
  if (p == Protocol::LL128) return "no LL128 on host memory";
  switch (a) {
    case Algorithm::Direct:
      if (c == Collective::ReduceScatter) return "no direct reducescatter";
      if (s.nhosts != 1) return "direct needs every rank on one host";
      if (!s.shm) return "direct needs shared memory";
      if (s.window_bytes == 0) return "no shared window";
      if (bytes > s.window_bytes) return "larger than the shared window";
      // Only allreduce has two forms (one-shot = LL, two-shot = Simple).
      if (p == Protocol::LL && c != Collective::AllReduce) return "direct has Simple only here";
      return nullptr;
    case Algorithm::Ring:
      break;
    case Algorithm::Tree:
      if (c != Collective::AllReduce && c != Collective::Broadcast && c != Collective::Reduce) {
        return "tree serves allreduce, broadcast and reduce only";
      }
      break;
    case Algorithm::RecursiveDoubling:
    case Algorithm::Rabenseifner:
      if (c != Collective::AllReduce) return "allreduce only";
      if (p == Protocol::Simple) return "no chunked form";
      return nullptr;
    case Algorithm::Hierarchical:
      if (c != Collective::AllReduce) return "allreduce only";
      if (s.nhosts < 2) return "needs two hosts or more";
      if (!s.uniform_hosts) return "hosts have different numbers of ranks";
      if (s.ranks_per_host < 2) return "needs two ranks per host or more";
      break;
  }
  if (p == Protocol::Simple && s.chunk_bytes == 0) return "no chunk size";
  return nullptr;
}

}  // namespace

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
  if (const char* reason = unavailable(c, a, p, bytes, shape_)) {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  }
  if (why != nullptr) *why = nullptr;
  if (shape_.nranks == 1) return 0.0;  // every algorithm is the same local copy
  const auto S = static_cast<double>(bytes);
  const bool reducing = c == Collective::Reduce;
  switch (a) {
    case Algorithm::Direct:
      switch (c) {
        case Collective::AllReduce:
          return p == Protocol::LL ? allreduce_one_shot(S) : allreduce_two_shot(S);
        case Collective::Reduce:  // run as a two-shot allreduce whose non-roots drop the result
          return allreduce_two_shot(S);
        case Collective::Broadcast:
          return broadcast_direct(S);
        case Collective::AllGather:
          return allgather_direct(S);
        case Collective::ReduceScatter:
          break;  // unavailable, above
      }
      break;
    case Algorithm::Ring:
      switch (c) {
        case Collective::AllReduce:
          return allreduce_ring(S, p);
        case Collective::Broadcast:
        case Collective::Reduce:
          return chain(S, p, reducing);
        case Collective::AllGather:
          return ring_pieces(S, p, false);
        case Collective::ReduceScatter:
          return ring_pieces(S, p, true);
      }
      break;
    case Algorithm::Tree:
      if (c == Collective::AllReduce) return allreduce_tree(S, p);
      return rooted_tree(S, p, reducing);
    case Algorithm::RecursiveDoubling:
      return allreduce_recursive_doubling(S);
    case Algorithm::Rabenseifner:
      return allreduce_rabenseifner(S);
    case Algorithm::Hierarchical:
      return allreduce_hierarchical(S, p);
  }
  if (why != nullptr) *why = "not modelled";
  return std::nullopt;
}

std::optional<double> predict_us(Collective c, Algorithm a, Protocol p, size_t bytes,
                                 const Shape& shape, const Figures& figures, const char** why) {
  return CostModel(shape, figures).predict_us(c, a, p, bytes, why);
}

}  // namespace ccl::tune
