#include "model.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/config.h"
#include "base/error.h"
#include "base/number_file.h"
#include "core/tuning/figures_cache.h"
#include "core/tuning/tuner.h"

namespace ccl::sim {

namespace {

// NVLink on an H100 SXM (NVLink 4): 18 links of 25 GB/s each way, 450 GB/s a direction per GPU
// (NVIDIA's datasheet: "900 GB/s" counts both). About 80% of it is reached by a copy stream:
// 360 GB/s, the NVLink total of tests/data/dgx_h100.xml (5+4+4+5 lanes of 20 GB/s) and close to
// the ~370 GB/s ring busbw nccl-tests report for 8 H100s without NVLS. Alpha: NCCL's own tuning
// table puts an NVLink hop at 0.6 us (LL) to ~4 us (Simple); 2 us sits between, for a step that
// also pays ccl's per-step bookkeeping.
constexpr tune::LinkFigures kNvlink{2.0, 360.0};
// perf/README.md: an 8-byte allreduce at 2 ranks takes about 1.2-2.5 us end to end on the VM, of
// which the host cost of the call (build, queue, driver calls) is 0.3-1 us; 1 us is the fixed
// part the links do not explain. The direct path skips the planner and the executor: its probed
// alpha (0.26 us) is the window's work alone, and the 2-rank calls of up to 512 B that
// perf/sim/validate.py measured took 0.8-0.9 us, so 0.5 us is its call's own cost.
constexpr double kCallOverheadUs = 1.0;
constexpr double kDirectOverheadUs = 0.5;
// The 2-core VM (lscpu): 2 MiB of L2 per core; memcpy (perf/micro copy_bench) moves 27 GiB/s
// at 1 MiB and 14 GiB/s at 64 MiB, where the buffers come from memory: 0.52 of the rate in
// cache. A model file sets both for another machine.
constexpr double kCacheBytes = 2.0 * 1024 * 1024;
constexpr double kMemoryFactor = 0.52;
// A loopback alpha (tcp or shm on one host) is two CPUs' work, the sender's and the receiver's,
// with next to nothing in flight between them (LogP: alpha = o + L + o, L ~ 0): half of it is
// the sender's. On a wire between hosts L is larger and this share smaller; a model file says so.
constexpr double kSenderShare = 0.5;

// What a key's value may be: >= 0 (latencies, overheads, byte counts), > 0 (bandwidths, rates),
// in (0, 1] (a slowdown), in [0, 1] (a share).
enum class Kind { NonNegative, Positive, Fraction, Share };

struct Key {
  const char* name;
  double& (*field)(SimModel&);
  Kind kind;
};

// The file's keys, in format_model's order. Captureless lambdas: one accessor per field.
const Key kKeys[] = {
    {"shm.alpha_us", [](SimModel& m) -> double& { return m.shm.alpha_us; }, Kind::NonNegative},
    {"shm.beta_gbps", [](SimModel& m) -> double& { return m.shm.beta_gbps; }, Kind::Positive},
    {"nvlink.alpha_us", [](SimModel& m) -> double& { return m.nvlink.alpha_us; },
     Kind::NonNegative},
    {"nvlink.beta_gbps", [](SimModel& m) -> double& { return m.nvlink.beta_gbps; }, Kind::Positive},
    {"net.alpha_us", [](SimModel& m) -> double& { return m.net.alpha_us; }, Kind::NonNegative},
    {"net.beta_gbps", [](SimModel& m) -> double& { return m.net.beta_gbps; }, Kind::Positive},
    {"fabric.gbps", [](SimModel& m) -> double& { return m.fabric_gbps; }, Kind::Positive},
    {"direct.alpha_us", [](SimModel& m) -> double& { return m.direct.alpha_us; },
     Kind::NonNegative},
    {"direct.beta_gbps", [](SimModel& m) -> double& { return m.direct.beta_gbps; }, Kind::Positive},
    {"reduce_gbps", [](SimModel& m) -> double& { return m.reduce_gbps; }, Kind::Positive},
    {"copy_gbps", [](SimModel& m) -> double& { return m.copy_gbps; }, Kind::Positive},
    {"call_overhead_us", [](SimModel& m) -> double& { return m.call_overhead_us; },
     Kind::NonNegative},
    {"direct_overhead_us", [](SimModel& m) -> double& { return m.direct_overhead_us; },
     Kind::NonNegative},
    {"cache_bytes", [](SimModel& m) -> double& { return m.cache_bytes; }, Kind::NonNegative},
    {"memory_factor", [](SimModel& m) -> double& { return m.memory_factor; }, Kind::Fraction},
    {"sender_share", [](SimModel& m) -> double& { return m.sender_share; }, Kind::Share},
};
constexpr size_t kNumKeys = sizeof(kKeys) / sizeof(kKeys[0]);

const char* range_error(Kind kind, double v) {
  if (!std::isfinite(v)) return "not a finite number";
  if (kind == Kind::NonNegative && v < 0) return "must be >= 0";
  if (kind == Kind::Positive && v <= 0) return "must be > 0";
  if (kind == Kind::Fraction && (v <= 0 || v > 1)) return "must be in (0, 1]";
  if (kind == Kind::Share && (v < 0 || v > 1)) return "must be in [0, 1]";
  return nullptr;
}

}  // namespace

SimModel from_figures(const tune::Figures& figures) {
  SimModel m;
  m.shm = figures.shm;
  m.nvlink = kNvlink;
  m.net = figures.net;
  // A non-blocking leaf gives each NIC an uplink at its own rate; oversubscription divides it.
  m.fabric_gbps = figures.net.beta_gbps;
  m.direct = figures.direct;
  m.reduce_gbps = figures.reduce_gbps;
  // The direct path's beta is measured as a plain copy between windows: the memcpy rate.
  m.copy_gbps = figures.direct.beta_gbps;
  m.call_overhead_us = kCallOverheadUs;
  m.direct_overhead_us = kDirectOverheadUs;
  m.cache_bytes = kCacheBytes;
  m.memory_factor = kMemoryFactor;
  m.sender_share = kSenderShare;
  return m;
}

double memory_scale(const SimModel& model, double footprint_bytes) {
  if (footprint_bytes <= model.cache_bytes) return 1;
  const double in_cache = model.cache_bytes / footprint_bytes;
  return 1 / (in_cache + (1 - in_cache) / model.memory_factor);
}

void check_model(const SimModel& model, const char* where) {
  SimModel copy = model;
  for (const Key& key : kKeys) {
    const double v = key.field(copy);
    if (const char* why = range_error(key.kind, v)) {
      throw_error(cclInvalidArgument, "%s: %s %s, not %g", where, key.name, why, v);
    }
  }
}

SimModel read_model_file(const std::string& path, const SimModel& base) {
  SimModel model = base;
  const char* names[kNumKeys];
  for (size_t k = 0; k < kNumKeys; ++k) names[k] = kKeys[k].name;
  read_number_file(path, "model file", names, [&](size_t k, double v) {
    const char* why = range_error(kKeys[k].kind, v);
    if (why == nullptr) kKeys[k].field(model) = v;
    return why;
  });
  return model;
}

std::string format_model(const SimModel& model) {
  std::string out =
      "# ccl-sim model: alpha in microseconds per message, bandwidths in GB/s (1e9 B/s)\n";
  SimModel copy = model;
  for (const Key& key : kKeys) {
    char value[64];
    // Shortest form that reads back as the same double.
    const auto result = std::to_chars(value, value + sizeof(value), key.field(copy));
    out += key.name;
    out += ' ';
    out.append(value, result.ptr);
    out += '\n';
  }
  return out;
}

std::vector<std::string> transports_for(const tune::Shape& shape,
                                        const std::string& net_transport) {
  // Rank 0's peers (tuner_setup.cc names each by its transport): the rest of its host over shm
  // unless it is off (then the network transport, loopback), the other hosts over the network.
  std::vector<std::string> transports;
  if (shape.ranks_per_host > 1) transports.push_back(shape.shm ? "shm" : net_transport);
  if (shape.nhosts > 1) transports.push_back(net_transport);
  return transports;
}

std::string local_host_name() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

tune::Figures figures_for(const tune::Shape& shape, const std::string& cache_dir,
                          const std::string& host, std::string* source) {
  if (!cache_dir.empty()) {
    const std::string key = tune::figures_cache_key(host, shape, transports_for(shape));
    const std::string path = tune::figures_cache_path(cache_dir, key);
    if (auto cached = tune::read_cached_figures(path, key)) {
      if (source) *source = "the tuner cache, " + path;
      return *cached;
    }
  }
  if (source) *source = "the defaults (no tuner cache entry for this shape)";
  return tune::default_figures();
}

tune::Figures figures_for(const tune::Shape& shape, std::string* source) {
  // The order of TunerSetup::run: a figures file wins over the cache.
  const std::string file = config_string("CCL_TUNER_FILE");
  if (!file.empty()) {
    if (source) *source = "CCL_TUNER_FILE " + file;
    return tune::read_figures_file(file);
  }
  return figures_for(shape, tune::figures_cache_dir(), local_host_name(), source);
}

}  // namespace ccl::sim
