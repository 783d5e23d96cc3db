// The command line of the *_perf binaries: nccl-tests' flags, with the same spellings, defaults
// and size syntax, plus --json. Parsing is pure (no I/O), so it is unit-tested.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ccl/ccl.h"

namespace ccl::perf {

// How the time of an iteration is combined across ranks (-a), as nccl-tests numbers them.
enum class Average { Rank0 = 0, Mean = 1, Min = 2, Max = 3 };

struct Options {
  int nthreads = 1;  // -t: only 1 on host
  int ngpus = 1;     // -g: only 1 on host
  size_t min_bytes = 32 << 20;
  size_t max_bytes = 32 << 20;
  size_t step_bytes = 1 << 20;
  size_t step_factor = 1;  // > 1: multiply, else add step_bytes
  int iters = 20;
  int warmup_iters = 1;
  int agg_iters = 1;   // -m: operations per group
  int run_cycles = 1;  // -N: 0 = forever
  int parallel_init = 0;
  int check = 1;  // -c: number of checked iterations (0: no check)
  std::vector<cclRedOp_t> ops = {cclSum};
  std::vector<cclDataType_t> types = {cclFloat32};
  int root = 0;            // -r: -1 = every rank in turn
  int blocking = 0;        // -z 1: NULL stream and a barrier after each operation
  int stream_null = 0;     // -y 1: NULL stream (each call returns when done), no barrier
  int timeout_s = 0;       // -T
  int cuda_graph = 0;      // -G: accepted, ignored on host
  int report_cputime = 0;  // -C
  Average average = Average::Mean;
  int local_register = 0;      // -R 1|2: send/receive buffers from cclMemAlloc
  std::string json_path;       // --json FILE (ours)
  bool device_memory = false;  // --memory device (ours): buffers on the rank's GPU, a CUDA stream
  bool help = false;
};

struct ParseResult {
  Options options;
  std::string error;  // empty when the command line is valid
  // Lines to print before running (e.g. "Option -G (CUDA graph) ... Ignoring").
  std::vector<std::string> notes;
};

// argv[0] is the program name and is skipped.
ParseResult parse_options(const std::vector<std::string>& args);
ParseResult parse_options(int argc, char** argv);

// nccl-tests' size syntax: a number with an optional K, M or G suffix (binary units, either case,
// optional space), e.g. "8", "64K", "1.5M". Returns -1 when malformed.
double parse_size(std::string_view text);

std::string usage(std::string_view program);

}  // namespace ccl::perf
