// cclrun's command line: cclrun -np N [--tag-output] [-x VAR[=VALUE]]... [--grace S]
// [--timeout S] [--restart-failed[=N]] [--bind core|numa|none] [--report-bindings] PROGRAM ARGS...
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bind.h"

namespace ccl::cclrun {

constexpr int kMaxRanks = 4096;
// --restart-failed=N: more replacements than this in one job is a crash loop, not recovery.
constexpr int kMaxRestarts = 1000;

struct Options {
  int nranks = 0;
  bool tag_output = false;
  // -x VAR=VALUE sets VAR for every rank; -x VAR forwards cclrun's own value (as mpirun does).
  std::vector<std::pair<std::string, std::string>> exports;
  double grace_seconds = 5.0;    // after the first failure, before SIGTERM
  double timeout_seconds = 0.0;  // 0: none
  // --restart-failed[=N]: how many failed ranks cclrun replaces in this job (0: none; the
  // option alone means 1). See supervisor.h for the policy.
  int restart_failed = 0;
  std::vector<std::string> command;  // PROGRAM ARGS...
  bool help = false;

  // --bind and --report-bindings (each rank's binding printed on stderr, as mpirun does).
  BindPolicy bind = BindPolicy::kNone;
  bool report_bindings = false;
};

// Returns false with a one-line reason in *error on bad usage.
bool parse_options(int argc, char** argv, Options* options, std::string* error);
const char* usage_text();

}  // namespace ccl::cclrun
