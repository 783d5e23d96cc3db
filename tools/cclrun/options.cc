#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace ccl::cclrun {

namespace {

bool parse_count(const std::string& text, int* out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  *out = std::atoi(text.c_str());
  return true;
}

bool parse_seconds(const std::string& text, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  // A week is far more than any job here should wait; larger values are typos.
  if (errno != 0 || *end != '\0' || !std::isfinite(value) || value < 0 || value > 604800) {
    return false;
  }
  *out = value;
  return true;
}

}  // namespace

const char* usage_text() {
  return "usage: cclrun -np N [--tag-output] [-x VAR[=VALUE]]... [--grace SECONDS]\n"
         "              [--timeout SECONDS] [--restart-failed[=N]] [--bind core|numa|none]\n"
         "              [--report-bindings] PROGRAM [ARGS...]\n"
         "\n"
         "Starts N ranks of PROGRAM on this machine, ready for cclCommInitFromEnv.\n"
         "\n"
         "  -np N, -n N, --np N  number of ranks (1..4096)\n"
         "  --tag-output         prefix every line a rank prints with \"[RANK] \"\n"
         "  -x VAR=VALUE         set VAR in every rank's environment\n"
         "  -x VAR               forward cclrun's own value of VAR\n"
         "  --grace SECONDS      after a rank fails, how long the others may take to exit on\n"
         "                       their own before SIGTERM (default 5; SIGKILL 2 s later)\n"
         "  --timeout SECONDS    kill every rank after this long and exit with 124\n"
         "  --restart-failed[=N] when a rank fails (non-zero exit or a signal), start a\n"
         "                       replacement instead of ending the job: the same command and\n"
         "                       environment (CCL_RANK, ...) plus CCL_REPLACEMENT=1 and\n"
         "                       CCL_REPLACEMENT_COUNT=K (the K-th replacement of that rank);\n"
         "                       at most N replacements per job (default 1, up to 1000); a\n"
         "                       replaced failure starts no --grace period. The replacement\n"
         "                       cannot rejoin the first rendezvous (CCL_COMM_ID is long\n"
         "                       over): the survivors shrink and grow back to it (cclCommGrow)\n"
         "  --bind core|numa|none\n"
         "                       pin local rank i to core i mod C (all its hardware\n"
         "                       threads) or to NUMA node i mod M, counting only the CPUs\n"
         "                       cclrun itself may use; default none; needs hwloc\n"
         "                       (--bind-to is the same)\n"
         "  --report-bindings    print each rank's binding on standard error\n"
         "  -h, --help           print this text\n"
         "\n"
         "Each rank gets CCL_RANK, CCL_WORLD_SIZE, CCL_LOCAL_RANK, CCL_LOCAL_SIZE, CCL_COMM_ID,\n"
         "CCL_COMM_SECRET and torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
         "MASTER_ADDR, MASTER_PORT. Only rank 0 reads standard input.\n"
         "Exit status: the first non-zero status of a rank (128+S for a rank killed by signal\n"
         "S), 124 on timeout, 127 if PROGRAM is not found, 2 on bad usage, else 0. A rank's\n"
         "status is that of its last process: a failure that got a replacement does not count.\n"
         "A replacement's lines carry its rank's tag under --tag-output; cclrun says on\n"
         "standard error when it starts one.\n";
}

bool parse_options(int argc, char** argv, Options* options, std::string* error) {
  bool have_np = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // PROGRAM
    // Long options may also be written --name=value.
    std::string name = arg;
    std::string value;
    bool inline_value = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    auto take_value = [&]() -> bool {
      if (inline_value) return true;
      if (i + 1 >= argc) {
        *error = name + " needs a value";
        return false;
      }
      value = argv[++i];
      return true;
    };
    if (name == "-h" || name == "--help") {
      options->help = true;
      return true;
    } else if (name == "-np" || name == "-n" || name == "--np") {
      if (!take_value()) return false;
      if (!parse_count(value, &options->nranks) || options->nranks < 1 ||
          options->nranks > kMaxRanks) {
        *error =
            name + " '" + value + "': the number of ranks must be 1.." + std::to_string(kMaxRanks);
        return false;
      }
      have_np = true;
    } else if (name == "--tag-output" && !inline_value) {
      options->tag_output = true;
    } else if (name == "-x") {
      if (!take_value()) return false;
      size_t split = value.find('=');
      std::string var = value.substr(0, split);
      if (var.empty()) {
        *error = "-x '" + value + "': expected VAR=VALUE or VAR";
        return false;
      }
      if (split != std::string::npos) {
        options->exports.emplace_back(var, value.substr(split + 1));
      } else if (const char* current = getenv(var.c_str())) {
        options->exports.emplace_back(var, current);
      }
      // An unset VAR forwards nothing, as with mpirun.
    } else if (name == "--grace") {
      if (!take_value()) return false;
      if (!parse_seconds(value, &options->grace_seconds)) {
        *error = "--grace '" + value + "': expected a number of seconds >= 0";
        return false;
      }
    } else if (name == "--timeout") {
      if (!take_value()) return false;
      if (!parse_seconds(value, &options->timeout_seconds) || options->timeout_seconds <= 0) {
        *error = "--timeout '" + value + "': expected a number of seconds > 0";
        return false;
      }
    } else if (name == "--restart-failed") {
      // The count only as --restart-failed=N: a separate word would be taken for PROGRAM.
      options->restart_failed = 1;
      if (inline_value && (!parse_count(value, &options->restart_failed) ||
                           options->restart_failed > kMaxRestarts)) {
        *error = "--restart-failed='" + value + "': expected a number of replacements 0.." +
                 std::to_string(kMaxRestarts);
        return false;
      }
    } else if (name == "--bind" || name == "--bind-to") {
      if (!take_value()) return false;
      if (!parse_bind_policy(value, &options->bind)) {
        *error = name + " '" + value + "': expected core, numa or none";
        return false;
      }
    } else if (name == "--report-bindings" && !inline_value) {
      options->report_bindings = true;
    } else {
      *error = "unknown option '" + arg + "'";
      return false;
    }
  }
  for (; i < argc; ++i) options->command.emplace_back(argv[i]);
  if (!have_np) {
    *error = "the number of ranks is missing (-np N)";
    return false;
  }
  if (options->command.empty()) {
    *error = "PROGRAM is missing";
    return false;
  }
  return true;
}

}  // namespace ccl::cclrun
