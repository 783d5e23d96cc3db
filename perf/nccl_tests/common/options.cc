#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "datatype.h"

namespace ccl::perf {
namespace {

struct Flag {
  char short_name;
  const char* long_name;
  bool takes_value;
};

// nccl-tests' letters and long names; --json (nccl-tests' -J writes its own schema) and --memory
// (nccl-tests always uses device memory, ccl host memory unless asked) are ours.
const Flag kFlags[] = {
    {'t', "nthreads", true},
    {'g', "ngpus", true},
    {'b', "minbytes", true},
    {'e', "maxbytes", true},
    {'i', "stepbytes", true},
    {'f', "stepfactor", true},
    {'n', "iters", true},
    {'m', "agg_iters", true},
    {'w', "warmup_iters", true},
    {'N', "run_cycles", true},
    {'p', "parallel_init", true},
    {'c', "check", true},
    {'o', "op", true},
    {'d', "datatype", true},
    {'r', "root", true},
    {'z', "blocking", true},
    {'y', "stream_null", true},
    {'T', "timeout", true},
    {'G', "cudagraph", true},
    {'C', "report_cputime", true},
    {'a', "average", true},
    {'R', "local_register", true},
    {'h', "help", false},
    {'\0', "json", true},
    {'\0', "memory", true},
};

std::optional<long long> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str() || *end != '\0') return std::nullopt;
  return v;
}

class Parser {
 public:
  explicit Parser(ParseResult* r) : r_(r), o_(r->options) {}

  // Applies one flag; returns false (with r_->error set) on a bad value.
  bool apply(const Flag& flag, const std::string& value) {
    const std::string name = std::string("'") + flag.long_name + "'";
    switch (flag.short_name) {
      case 't':
        return int_in(value, 1, 1, &o_.nthreads, "nthreads (only 1 thread per process on host)");
      case 'g':
        return int_in(value, 1, 1, &o_.ngpus, "ngpus (only 1 device per thread on host)");
      case 'b':
        return size(value, &o_.min_bytes, "minbytes");
      case 'e':
        return size(value, &o_.max_bytes, "maxbytes");
      case 'i':
        return size(value, &o_.step_bytes, "stepBytes");
      case 'f': {
        int f = 0;
        if (!int_in(value, 0, 1 << 30, &f, "stepfactor")) return false;
        o_.step_factor = static_cast<size_t>(f);
        return true;
      }
      case 'n':
        return int_in(value, 1, 1 << 30, &o_.iters, "iters");
      case 'm':
        return int_in(value, 1, 1 << 20, &o_.agg_iters, "agg_iters");
      case 'w':
        return int_in(value, 0, 1 << 30, &o_.warmup_iters, "warmup_iters");
      case 'N':
        return int_in(value, 0, 1 << 30, &o_.run_cycles, "run_cycles");
      case 'p':
        return int_in(value, 0, 1, &o_.parallel_init, "parallel_init");
      case 'c':
        return int_in(value, 0, 1 << 20, &o_.check, "check");
      case 'o':
        return op(value);
      case 'd':
        return type(value);
      case 'r': {
        if (value == "all") {
          o_.root = -1;
          return true;
        }
        return int_in(value, -1, 1 << 30, &o_.root, "root");
      }
      case 'z':
        return int_in(value, 0, 2, &o_.blocking, "blocking");
      case 'y':
        return int_in(value, 0, 1, &o_.stream_null, "stream_null");
      case 'T':
        return int_in(value, 0, 1 << 30, &o_.timeout_s, "timeout");
      case 'G':
        if (!int_in(value, 0, 1 << 30, &o_.cuda_graph, "cudagraph")) return false;
        if (o_.cuda_graph > 0) {
          r_->notes.push_back("Option -G (CUDA graph) is not supported on host. Ignoring");
          o_.cuda_graph = 0;
        }
        return true;
      case 'C':
        return int_in(value, 0, 1, &o_.report_cputime, "report_cputime");
      case 'a': {
        int a = 0;
        if (!int_in(value, 0, 3, &a, "average")) return false;
        o_.average = static_cast<Average>(a);
        return true;
      }
      case 'R':
        return int_in(value, 0, 2, &o_.local_register, "local_register");
      case 'h':
        o_.help = true;
        return true;
      case '\0':
        if (std::string(flag.long_name) == "memory") {
          if (value != "host" && value != "device") {
            return fail("--memory must be host or device, not '" + value + "'");
          }
          o_.device_memory = value == "device";
          return true;
        }
        if (value.empty()) return fail("--json needs a file name");
        o_.json_path = value;
        return true;
    }
    return fail("invalid option " + name);
  }

  bool fail(const std::string& message) {
    r_->error = message;
    return false;
  }

 private:
  bool int_in(const std::string& value, long long lo, long long hi, int* out, const char* what) {
    const auto v = parse_int(value);
    if (!v || *v < lo || *v > hi) {
      return fail("invalid value '" + value + "' for '" + what + "' (expected an integer in [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "])");
    }
    *out = static_cast<int>(*v);
    return true;
  }

  bool size(const std::string& value, size_t* out, const char* what) {
    const double parsed = parse_size(value);
    if (parsed < 0 || parsed >= 0x1p63) {
      return fail(std::string("invalid size specified for '") + what + "'");
    }
    *out = static_cast<size_t>(parsed);
    return true;
  }

  bool op(const std::string& value) {
    if (value == "all") {
      o_.ops = all_ops();
      return true;
    }
    if (value == "mulsum")
      return fail("op 'mulsum' (PreMulSum) is not supported by the perf tests yet");
    const auto parsed = parse_op(value);
    if (!parsed) return fail("invalid op '" + value + "' (sum, prod, max, min, avg or all)");
    o_.ops = {*parsed};
    return true;
  }

  bool type(const std::string& value) {
    if (value == "all") {
      o_.types = all_types();
      return true;
    }
    const auto parsed = parse_type(value);
    if (!parsed) {
      return fail("invalid type '" + value +
                  "' (int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, "
                  "f8e4m3, f8e5m2 or all)");
    }
    o_.types = {*parsed};
    return true;
  }

  ParseResult* r_;
  Options& o_;
};

const Flag* find_short(char c) {
  for (const auto& f : kFlags) {
    if (f.short_name == c && c != '\0') return &f;
  }
  return nullptr;
}

const Flag* find_long(std::string_view name) {
  for (const auto& f : kFlags) {
    if (name == f.long_name) return &f;
  }
  return nullptr;
}

}  // namespace

double parse_size(std::string_view text) {
  const std::string s(text);
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (end == begin || errno != 0 || !std::isfinite(v) || v < 0) return -1.0;
  while (*end == ' ' || *end == '\t') ++end;
  double unit = 1;
  if (*end != '\0') {
    switch (*end) {
      case 'G':
      case 'g':
        unit = 1024.0 * 1024 * 1024;
        break;
      case 'M':
      case 'm':
        unit = 1024.0 * 1024;
        break;
      case 'K':
      case 'k':
        unit = 1024.0;
        break;
      default:
        return -1.0;
    }
    if (end[1] != '\0') return -1.0;
  }
  return v * unit;
}

ParseResult parse_options(const std::vector<std::string>& args) {
  ParseResult r;
  Parser p(&r);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const Flag* flag = nullptr;
    std::optional<std::string> value;
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      std::string name = arg.substr(2);
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      }
      flag = find_long(name);
      if (!flag) {
        p.fail("invalid option '" + arg + "'");
        return r;
      }
    } else if (arg.size() >= 2 && arg[0] == '-') {
      flag = find_short(arg[1]);
      if (!flag) {
        p.fail(std::string("invalid option '") + arg[1] + "'");
        return r;
      }
      if (arg.size() > 2) value = arg.substr(2);
    } else {
      p.fail("unexpected argument '" + arg + "'");
      return r;
    }
    if (flag->takes_value && !value) {
      if (i + 1 >= args.size()) {
        p.fail("option '" + arg + "' requires a value");
        return r;
      }
      value = args[++i];
    }
    if (!flag->takes_value && value) {
      p.fail("option '" + arg + "' takes no value");
      return r;
    }
    if (!p.apply(*flag, value.value_or(""))) return r;
  }

  const Options& o = r.options;
  if (o.help) return r;
  if (o.min_bytes > o.max_bytes) {
    p.fail("invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(o.min_bytes) + " > " +
           std::to_string(o.max_bytes));
  } else if (o.step_factor > 1 && o.min_bytes == 0) {
    p.fail("'minbytes' must be at least 1 with a step factor (-f)");
  } else if (o.step_factor <= 1 && o.step_bytes == 0 && o.min_bytes < o.max_bytes) {
    p.fail("'stepbytes' must be at least 1 without a step factor (-f)");
  }
  return r;
}

ParseResult parse_options(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return parse_options(args);
}

std::string usage(std::string_view program) {
  std::string u = "USAGE: " + std::string(program) + " \n";
  const char* const lines[] = {
      "[-t,--nthreads <num threads>] (1 on host)",
      "[-g,--ngpus <gpus per thread>] (1 on host)",
      "[-b,--minbytes <min size in bytes>]",
      "[-e,--maxbytes <max size in bytes>]",
      "[-i,--stepbytes <increment size>]",
      "[-f,--stepfactor <increment factor>]",
      "[-n,--iters <iteration count>]",
      "[-m,--agg_iters <aggregated iteration count>]",
      "[-w,--warmup_iters <warmup iteration count>]",
      "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)]",
      "[-p,--parallel_init <0/1>]",
      "[-c,--check <check iteration count>]",
      "[-o,--op <sum/prod/min/max/avg/all>]",
      "[-d,--datatype <nccltype/all>]",
      "[-r,--root <root/all>]",
      "[-z,--blocking <0/1>]",
      "[-y,--stream_null <0/1>]",
      "[-T,--timeout <time in seconds>]",
      "[-G,--cudagraph <num graph launches>] (ignored on host)",
      "[-C,--report_cputime <0/1>]",
      "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>]",
      "[-R,--local_register <0/1/2>]",
      "[--json <file> write the parameters and results as JSON (rank 0)]",
      "[--memory <host/device> buffers in host memory (default) or on the rank's GPU]",
      "[-h,--help]",
  };
  for (const char* line : lines) u += std::string("\t") + line + " \n";
  return u;
}

}  // namespace ccl::perf
