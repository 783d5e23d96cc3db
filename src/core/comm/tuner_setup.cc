// The probe times a few real operations over the communicator's own links and solves the cost
// model's formulas for its figures:
//   - alpha of a link: a ring allreduce of one element per rank is 2(n-1) steps of nothing;
//   - beta of a link: a ring allreduce of kProbeBytes, less its steps and its reductions;
//   - reduce bandwidth: a local sum of kProbeBytes;
//   - the direct path's alpha, beta and the reduce bandwidth under load, from its one-shot and
//     two-shot allreduce (probe_direct).
// Each is the median of a few calls after a warm-up. Ranks measure different times, but every
// rank must predict the same costs (ranks that chose different algorithms would wait for each
// other forever), so rank 0's figures are broadcast and used by all. Figures rank 0 will keep
// in its tuner cache (core/tuning/figures_cache.h), which then decide every later launch, are
// each the median of three whole probes.
#include "core/comm/tuner_setup.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <vector>

#include "algorithms/recursive_doubling.h"
#include "algorithms/reduce/reduce.h"
#include "algorithms/ring.h"
#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "core/tuning/figures_cache.h"

namespace ccl {

namespace {

constexpr size_t kProbeBytes = 256 * 1024;
// The direct path's crossover between one-shot and two-shot lies in its window: probe inside it.
constexpr size_t kDirectProbeBytes = 512 * 1024;
constexpr int kProbeCalls = 15;
constexpr int kProbeWarmups = 3;

// The median time of `calls` calls of `body` after a few warm-up calls (the first calls of a new
// communicator touch fresh pages and wait for late ranks), in microseconds.
template <typename Body>
double median_us(int calls, Body&& body) {
  for (int i = 0; i < kProbeWarmups; ++i) body();
  std::vector<double> times;
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + calls / 2, times.end());
  return times[calls / 2];
}

// Probes a communicator runs where rank 0 will keep the figures (the median of each).
constexpr uint32_t kKeptProbes = 3;

// Each figure's median over `probes` (an odd number of them, at least one).
tune::Figures median_figures(const std::vector<tune::Figures>& probes) {
  tune::Figures out = probes.front();
  const auto median_of = [&](double& (*field)(tune::Figures&)) {
    std::vector<double> values;
    for (tune::Figures f : probes) values.push_back(field(f));
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    field(out) = values[values.size() / 2];
  };
  median_of([](tune::Figures& f) -> double& { return f.shm.alpha_us; });
  median_of([](tune::Figures& f) -> double& { return f.shm.beta_gbps; });
  median_of([](tune::Figures& f) -> double& { return f.net.alpha_us; });
  median_of([](tune::Figures& f) -> double& { return f.net.beta_gbps; });
  median_of([](tune::Figures& f) -> double& { return f.direct.alpha_us; });
  median_of([](tune::Figures& f) -> double& { return f.direct.beta_gbps; });
  median_of([](tune::Figures& f) -> double& { return f.reduce_gbps; });
  return out;
}

// bytes / (time - fixed costs), in GB/s (1e3 bytes per us); `fallback` when the time is all fixed
// cost.
double bandwidth_gbps(double bytes, double time_us, double fixed_us, double fallback) {
  const double left_us = time_us - fixed_us;
  return left_us > 0 ? bytes / (left_us * 1e3) : fallback;
}

// The microseconds `bytes` take at `gbps`.
double transfer_us(double bytes, double gbps) { return bytes / (gbps * 1e3); }

}  // namespace

void TunerSetup::run() {
  runner_.start_unrecorded();  // the probes below run as one operation, under one deadline
  tune::Shape shape;
  const CommLayout& layout = peers_.layout();
  shape.nranks = options_.nranks;
  shape.nhosts = layout.nhosts;
  shape.ranks_per_host = layout.ranks_per_host;
  shape.uniform_hosts = layout.uniform_hosts;
  shape.shm = peers_.local_shm();
  shape.window_bytes = peers_.direct() ? peers_.direct()->max_bytes() : 0;
  shape.chunk_bytes = planner_.chunk_bytes();
  const tune::Selection selection =
      tune::Selection::parse(config_string("CCL_ALGO"), config_string("CCL_PROTO"));
  const std::string file = config_string("CCL_TUNER_FILE");
  tune::Figures figures;
  std::string source;
  if (!file.empty()) {
    figures = tune::read_figures_file(file);
    share_from_rank0(&figures, sizeof(figures));
    source = file;
  } else if (options_.figures) {
    figures = *options_.figures;
    source = "the parent communicator's";
  } else {
    source = probe_or_recall(shape, &figures);
  }
  CCL_INFO(kTune, "rank %d: link figures (%s):\n%s", options_.rank, source.c_str(),
           tune::format_figures(figures).c_str());
  planner_.set_tuner(std::make_unique<tune::Tuner>(shape, figures, selection));
}

std::string TunerSetup::probe_or_recall(const tune::Shape& shape, tune::Figures* figures) {
  // Rank 0 looks the shape up and tells everyone whether to probe: the probe is collective.
  struct Recalled {
    tune::Figures figures;
    uint32_t found;
    uint32_t probes;  // how many probes to run: several where the figures will be kept
  } recalled{};
  recalled.probes = 1;
  static_assert(std::is_trivially_copyable_v<Recalled>);
  std::string key, path;
  if (options_.rank == 0) {
    const std::string dir = tune::figures_cache_dir();
    if (!dir.empty()) {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      std::vector<std::string> transports;
      for (int peer = 0; peer < options_.nranks; ++peer) {
        if (peer != options_.rank) transports.emplace_back(peers_.transport_name(peer));
      }
      key = tune::figures_cache_key(host, shape, std::move(transports));
      path = tune::figures_cache_path(dir, key);
      if (auto cached = tune::read_cached_figures(path, key)) {
        recalled.figures = *cached;
        recalled.found = 1;
      } else {
        recalled.probes = kKeptProbes;
      }
    }
  }
  share_from_rank0(&recalled, sizeof(recalled));
  if (recalled.found != 0) {
    *figures = recalled.figures;
    return options_.rank == 0 ? "rank 0's, from " + path : "rank 0's, from its tuner cache";
  }
  // Kept figures decide every later launch: each is the median of several probes (the first
  // of a new process runs on cold caches and pages), not one probe's.
  std::vector<tune::Figures> probes;
  for (uint32_t i = 0; i < recalled.probes; ++i) probes.push_back(probe_figures(shape));
  *figures = median_figures(probes);
  share_from_rank0(figures, sizeof(*figures));
  if (!path.empty() && tune::write_cached_figures(path, key, *figures)) {
    return "probed; rank 0's, kept in " + path;
  }
  return "probed; rank 0's";
}

tune::Figures TunerSetup::probe_figures(const tune::Shape& shape) {
  const int nranks = options_.nranks;
  tune::Figures figures = tune::default_figures();
  const algo::ExecOp sum = algo::reduction_op(cclFloat, cclSum, nranks);
  const size_t probe_count = kProbeBytes / sizeof(float);
  const size_t buffer_count = std::max(kProbeBytes, kDirectProbeBytes) / sizeof(float);
  std::vector<float> in(buffer_count, 1.0f), out(buffer_count);

  // Local reduction bandwidth: a sum of two kProbeBytes vectors reads two and writes one.
  const double reduce_us =
      median_us(kProbeCalls, [&] { sum.reduce(out.data(), in.data(), out.data(), probe_count); });
  figures.reduce_gbps = bandwidth_gbps(kProbeBytes, reduce_us, 0, figures.reduce_gbps);
  if (nranks == 1) return figures;
  if (peers_.direct()) probe_direct(&figures, in.data(), out.data(), sum);

  // A link: the ring's steps, first empty, then carrying kProbeBytes / n each.
  const double steps = 2.0 * (nranks - 1);
  auto ring_us = [&](size_t count) {
    const algo::Schedule schedule =
        algo::ring_allreduce(planner_.ring_params(count, sizeof(float), 0));
    return median_us(kProbeCalls,
                     [&] { runner_.execute(schedule, in.data(), out.data(), sum, "probe"); });
  };
  tune::LinkFigures& link = shape.nhosts == 1 && shape.shm ? figures.shm : figures.net;
  const double empty_ring_us = ring_us(static_cast<size_t>(nranks));
  const double full_ring_us = ring_us(probe_count);
  CCL_TRACE(kTune, "probe: ring of %d elements %.2f us, of %zu B %.2f us, sum of %zu B %.2f us",
            nranks, empty_ring_us, kProbeBytes, full_ring_us, kProbeBytes, reduce_us);
  link.alpha_us = empty_ring_us / steps;
  const double moved = steps / nranks * kProbeBytes;
  const double reduced = (nranks - 1.0) / nranks * kProbeBytes;
  link.beta_gbps = bandwidth_gbps(moved, full_ring_us,
                                  steps * link.alpha_us + transfer_us(reduced, figures.reduce_gbps),
                                  link.beta_gbps);
  if (shape.nhosts > 1) fit_net_by_exchange(shape, &figures, in.data(), out.data(), sum);
  return figures;
}

// Across hosts a ring step is paced by one transfer per link, while recursive doubling,
// Rabenseifner and the hierarchical allreduce exchange in pairs, all ranks of a host crossing at
// once; between network namespaces on this 2-core VM the pairs' bytes cost 3-4x what the ring's
// suggest. So the net figures are fitted to what the exchanges do: the model's recursive doubling
// time is linear in the net alpha and 1/beta, and two timed runs (one element per rank,
// kProbeBytes) give both. A fit that is not positive (noise) keeps the ring's figures.
void TunerSetup::fit_net_by_exchange(const tune::Shape& shape, tune::Figures* figures,
                                     const float* in, float* out, const algo::ExecOp& sum) {
  const int nranks = options_.nranks;
  auto measured_us = [&](size_t count) {
    const algo::Schedule schedule =
        algo::recursive_doubling_allreduce(nranks, options_.rank, count);
    return median_us(kProbeCalls, [&] { runner_.execute(schedule, in, out, sum, "probe"); });
  };
  auto model_us = [&](double alpha_us, double beta_gbps, size_t bytes) {
    tune::Figures f = *figures;
    f.net = {alpha_us, beta_gbps};
    return *tune::CostModel(shape, f).predict_us(
        tune::Collective::AllReduce, tune::Algorithm::RecursiveDoubling, tune::Protocol::LL, bytes);
  };
  const size_t small = static_cast<size_t>(nranks) * sizeof(float);
  const double t_small = measured_us(static_cast<size_t>(nranks));
  const double t_large = measured_us(kProbeBytes / sizeof(float));
  // t = base + alpha * per_alpha + (1 / beta) * per_inverse_beta, for each size.
  const double per_alpha = model_us(2, 1e9, small) - model_us(1, 1e9, small);
  const double base_small = model_us(1, 1e9, small) - per_alpha;
  const double alpha = (t_small - base_small) / per_alpha;
  const double per_inverse_beta = model_us(1, 1, kProbeBytes) - model_us(1, 2, kProbeBytes);
  const double rest_large = model_us(alpha > 0 ? alpha : 1, 1e9, kProbeBytes);
  const double inverse_beta = (t_large - rest_large) / (2 * per_inverse_beta);
  CCL_TRACE(kTune, "probe: recursive doubling of %zu B %.2f us, of %zu B %.2f us", small, t_small,
            kProbeBytes, t_large);
  if (alpha > 0 && inverse_beta > 0) figures->net = {alpha, 1 / inverse_beta};
}

// The direct path: alpha from a one-element one-shot allreduce; then a one-shot and a two-shot
// of the same S give the model's two equations (x = S / beta, y = S / reduce bandwidth):
//   one-shot  t1 = a + x + (n-1) y
//   two-shot  t2 = 2a + (1 + (n-1)/n) x + (n-1)/n y
// solved for x and y. The reduce bandwidth found this way is what n ranks sharing the cores see
// while they read each other's memory, which the schedules' reductions see too, so it replaces
// the local measurement. A solution that is not positive (noise) keeps the earlier figures.
void TunerSetup::probe_direct(tune::Figures* figures, const float* in, float* out,
                              const algo::ExecOp& sum) {
  algo::DirectCollectives& direct = *peers_.direct();
  const size_t count = std::min(kDirectProbeBytes, direct.max_bytes()) / sizeof(float);
  auto direct_us = [&](size_t elems, bool one_shot) {
    return median_us(kProbeCalls, [&] {
      direct.all_reduce(in, out, elems, sum, Deadline::after(options_.timeout),
                        algo::OpLabel{"tuner probe", 0}, one_shot);
    });
  };
  const double a = direct_us(1, true);
  const double t1 = direct_us(count, true), t2 = direct_us(count, false);
  const double n = options_.nranks, S = static_cast<double>(count * sizeof(float));
  const double r1 = t1 - a, r2 = t2 - 2 * a;
  const double a11 = 1, a12 = n - 1, a21 = 1 + (n - 1) / n, a22 = (n - 1) / n;
  const double det = a11 * a22 - a12 * a21;  // -2(n-1)^2/n: never 0 for n > 1
  const double x = (r1 * a22 - a12 * r2) / det, y = (a11 * r2 - a21 * r1) / det;
  CCL_TRACE(kTune, "probe: direct 4 B %.2f us, %.0f B one-shot %.2f us, two-shot %.2f us", a, S, t1,
            t2);
  figures->direct.alpha_us = a;
  if (x > 0 && y > 0) {
    figures->direct.beta_gbps = bandwidth_gbps(S, x, 0, figures->direct.beta_gbps);
    figures->reduce_gbps = bandwidth_gbps(S, y, 0, figures->reduce_gbps);
  }
}

void TunerSetup::share_from_rank0(void* data, size_t bytes) {
  if (options_.nranks == 1) return;
  // The struct's bytes as they are: every rank runs the same build.
  algo::ExecOp op;
  op.elem_size = 1;
  const algo::Schedule schedule = algo::chain_broadcast(planner_.ring_params(bytes, 1, 0), 0);
  runner_.execute(schedule, data, data, op, "tuner figures");
}

}  // namespace ccl
