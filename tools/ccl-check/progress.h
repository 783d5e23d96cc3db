// ccl-check's progress display (rank 0 only): what runs now, how far the run is and about how
// long is left. On a terminal one status line is redrawn in place; otherwise (a log file, a CI
// job, srun's output) each step is a plain line, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace ccl_check {

class Progress {
 public:
  // Nothing is shown when `show` is false (other ranks, --quiet). `out` is stderr in the tool.
  Progress(bool show, std::FILE* out);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // The number of steps the run is expected to take (sweep points, pair rounds, ...); steps
  // added later (retests) raise it.
  void plan(int steps) { planned_ = steps; }
  void add_to_plan(int steps) { planned_ += steps; }
  // One step starts: `what` is shown with the count, the time spent and the time left.
  void step(const std::string& what);
  // A message that is not a step (a warning): always its own line.
  void note(const std::string& what);
  // Ends a status line still drawn on the terminal (before other output).
  void finish();
  // The status line as it would be drawn for `what` after `elapsed` (for tests).
  static std::string line(const std::string& what, int done, int planned, double elapsed_s);

 private:
  bool show_;
  std::FILE* out_;
  bool terminal_;
  bool drawn_ = false;  // a status line is on the terminal now
  int planned_ = 0;
  int done_ = 0;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace ccl_check
