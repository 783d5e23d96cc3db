// The metrics file (CCL_METRICS_FILE, CCL_METRICS_INTERVAL; docs/metrics.md): every communicator
// of this process whose op runner counts (metrics.h) is registered here, and one background
// thread per process rewrites the file every CCL_METRICS_INTERVAL seconds, for node_exporter's
// textfile collector or any scraper of Prometheus text.
//
// One file per process, holding all its communicators' series (each labelled comm and rank, so
// files of several processes never hold the same series): a fixed number of files however many
// communicators a job splits, each replaced whole. Its path is CCL_METRICS_FILE expanded by the
// op runner with trace_path.h's rules 1 and 2 (%h host, %p pid, %r rank; without %r, .<rank>
// before the extension: ccl.prom -> ccl.0.prom) for the process's first communicator registered
// with this pattern; later ones with the same pattern join that file (and its interval becomes
// theirs). Communicators registered with another pattern (setenv between them) write another file
// the same way.
//
// The file is written to a temporary file in the same directory and renamed over PATH
// (base/replace_file.h), so a reader sees the old file or the new one, never a part (the textfile
// collector's rule). It is written every interval while a communicator of it is alive, once more
// when one is finalized or destroyed (so a short job leaves its final counts; a destroyed
// communicator's final counts stay in the file for the rest of the process, the last 128 of them),
// and when the process exits (std::atexit: the thread is stopped and joined first). Every wait is
// bounded: the thread sleeps on a condition variable until the next write is due or it is stopped.
// A forked child writes nothing of its parent's (it starts its own exporter if it makes
// communicators). A file that cannot be written is a WARN line naming it and why, once per path,
// whatever CCL_DEBUG says.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/diagnostics/metrics.h"

namespace ccl::metrics {

struct MetricsSettings {
  std::string file;     // CCL_METRICS_FILE: the pattern; empty: off (no metrics object at all)
  int interval_s = 10;  // CCL_METRICS_INTERVAL
};
inline constexpr int kMaxIntervalSeconds = 86400;

// CCL_METRICS_FILE and CCL_METRICS_INTERVAL; an interval that is not a whole number of seconds in
// [1, 86400] throws InvalidUsage naming the variable and its value (also when the file is unset,
// so that a typo is found before it matters).
MetricsSettings read_metrics_settings();

struct File;

// One communicator's metrics on this rank, registered with the process's exporter for its life.
class MetricsExport {
 public:
  // `path`: settings.file expanded for this communicator (used if it is the first of its
  // pattern in this process).
  MetricsExport(const MetricsSettings& settings, const std::string& path, int rank, int nranks);
  // Unregisters; the file is written with this communicator's final counts.
  ~MetricsExport();
  MetricsExport(const MetricsExport&) = delete;
  MetricsExport& operator=(const MetricsExport&) = delete;

  // The communicator has connected: its series appear from now on, labelled `comm` (the op
  // runner gives trace_path.h's communicator_tag: "<name>-<tag>", or "<tag>").
  void connected(std::string comm);
  // An operation ended (the op mutex's holder).
  void record(OpKind kind, uint64_t bytes, uint64_t ns, Outcome outcome) {
    counters_.record(kind, bytes, ns, outcome);
  }
  // Writes the file now (finalize).
  void write_now();
  const std::string& path() const;  // the file this communicator's series go to

 private:
  CommMetrics counters_;
  File* file_;  // the exporter's, never freed
  const pid_t pid_;
};

// Writes now every file that has a communicator alive (the exit handler does it too).
void write_all_metrics_files();

}  // namespace ccl::metrics
