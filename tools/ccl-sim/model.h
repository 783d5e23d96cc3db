// The simulator's model of links and local work: per link class a latency alpha (us, paid once
// per message) and a bandwidth beta (GB/s, 1e9 bytes a second), plus the rates of a rank's local
// copies and reductions and the fixed cost of a call.
//
// It starts from the tuner's figures (core/tuning/cost_model.h), so that the simulator and the
// tuner price a link alike: shm, net, direct and reduce_gbps carry over as they are; the classes
// the tuner does not know (NVLink, the fabric's uplinks) get documented defaults (model.cc). A
// model file overrides any of them with "key value" lines in the syntax of the tuner's figures
// file, so a figures file (CCL_TUNER_FILE, a tuner cache entry) is also a model file.
#pragma once

#include <string>
#include <vector>

#include "core/tuning/cost_model.h"

namespace ccl::sim {

struct SimModel {
  tune::LinkFigures shm;        // ranks of one host over shared memory (one rank's stream)
  tune::LinkFigures nvlink;     // GPUs joined by NVLink or NVSwitch (one GPU's stream, one way)
  tune::LinkFigures net;        // one rank's stream through its host's NIC
  double fabric_gbps = 1;       // a leaf switch's uplink bandwidth per NIC, before oversubscription
  tune::LinkFigures direct;     // the shared window: alpha one synchronisation, beta copy bandwidth
  double reduce_gbps = 1;       // bytes one rank reduces a second (memory-bound sum)
  double copy_gbps = 1;         // a local memcpy on one rank
  double call_overhead_us = 0;  // API, planning and queueing of one collective call on a rank
  double direct_overhead_us = 0;  // the same on the direct path (no planner, no executor)
  // A CPU's copies above its cache: the figures (shm, reduce, copy) are probed with buffers that
  // fit in cache; a call whose buffers take more than cache_bytes on a rank runs them slower, by
  // memory_factor once nothing fits (memory_scale).
  double cache_bytes = 0;
  double memory_factor = 1;
  // The share of a CPU link's alpha (shm, net) the sender spends on each message before its
  // bytes move (LogP's o over alpha; Route::send_us): back-to-back messages pay it in series.
  double sender_share = 0;
};

// The rate of a CPU's copies for a call whose buffers take `footprint_bytes` on a rank, relative
// to the in-cache figures: the share h = cache_bytes / footprint (at most 1) of its bytes runs at
// the cache's rate, the rest at memory_factor of it, so the time per byte is h + (1 - h) /
// memory_factor and the rate its inverse. 1 when the footprint fits.
double memory_scale(const SimModel& model, double footprint_bytes);

// The model the tuner's `figures` imply, with the defaults of model.cc for the rest.
SimModel from_figures(const tune::Figures& figures);

// Throws InvalidArgument unless every alpha and call_overhead_us are finite and >= 0 and every
// bandwidth finite and > 0; `where` prefixes the message.
void check_model(const SimModel& model, const char* where);

// `base` with the keys of the file at `path` replaced: "key value" lines, '#' to the end of a
// line is a comment. Keys: shm.alpha_us shm.beta_gbps nvlink.alpha_us nvlink.beta_gbps
// net.alpha_us net.beta_gbps fabric.gbps direct.alpha_us direct.beta_gbps reduce_gbps copy_gbps
// call_overhead_us direct_overhead_us cache_bytes memory_factor sender_share. An unreadable file,
// an unknown or repeated key, a missing, extra or out-of-range value throws InvalidArgument naming
// the file, the line and the key.
SimModel read_model_file(const std::string& path, const SimModel& base);

// Every key of the model, one "key value" line each, in the order above: a model file that
// reads back as `model` exactly.
std::string format_model(const SimModel& model);

// The transports rank 0 of a real run of `shape` reaches its peers by, as the tuner cache key
// names them: "shm" (or `net_transport` when shm is off) for its own host, `net_transport` for
// the others; none for one rank.
std::vector<std::string> transports_for(const tune::Shape& shape,
                                        const std::string& net_transport = "tcp");

// The figures a real run of `shape` would use on this host: CCL_TUNER_FILE's when it is set,
// else this host's tuner cache entry for the shape (figures_cache_dir()), else
// default_figures(). `source` (when given) says which, for the report.
tune::Figures figures_for(const tune::Shape& shape, std::string* source = nullptr);
// The same lookup in the cache at `cache_dir` ("" for none) for the host named `host`, with no
// CCL_TUNER_FILE: what tests and --figures cache call.
tune::Figures figures_for(const tune::Shape& shape, const std::string& cache_dir,
                          const std::string& host, std::string* source = nullptr);

// This machine's host name, as the tuner cache key spells it (gethostname).
std::string local_host_name();

}  // namespace ccl::sim
