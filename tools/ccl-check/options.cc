#include "options.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ccl_check {

namespace {

const std::vector<std::string> kCollectives = {"allreduce", "broadcast",     "reduce",
                                               "allgather", "reducescatter", "alltoall"};

double parse_number(const std::string& flag, const std::string& text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0)) {
    throw std::invalid_argument(flag + ": \"" + text + "\" is not a number >= 0");
  }
  return v;
}

int parse_count(const std::string& flag, const std::string& text, int min) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min) {
    throw std::invalid_argument(flag + ": \"" + text +
                                "\" is not a whole number >= " + std::to_string(min));
  }
  return v;
}

void check_collective(const std::string& where, const std::string& name) {
  for (const auto& c : kCollectives) {
    if (c == name) return;
  }
  throw std::invalid_argument(where + ": \"" + name +
                              "\" is not a collective (allreduce, broadcast, reduce, allgather, "
                              "reducescatter, alltoall)");
}

}  // namespace

size_t parse_bytes(const std::string& text) {
  size_t end = 0;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  if (end == 0) throw std::invalid_argument("\"" + text + "\" is not a size (8, 1K, 64M, 1G)");
  uint64_t v = 0;
  std::from_chars(text.data(), text.data() + end, v);
  const std::string unit = text.substr(end);
  int shift = 0;
  if (unit == "K" || unit == "k")
    shift = 10;
  else if (unit == "M" || unit == "m")
    shift = 20;
  else if (unit == "G" || unit == "g")
    shift = 30;
  else if (!unit.empty())
    throw std::invalid_argument("\"" + text + "\" is not a size (8, 1K, 64M, 1G)");
  return static_cast<size_t>(v) << shift;
}

Threshold parse_threshold(const std::string& text, bool latency) {
  const char* flag = latency ? "--max-latency" : "--min-busbw";
  const auto colon = text.find(':'), eq = text.find('=');
  if (colon == std::string::npos || eq == std::string::npos || eq < colon) {
    throw std::invalid_argument(std::string(flag) + ": \"" + text +
                                "\" is not COLLECTIVE:SIZE=" + (latency ? "Nus" : "GBps"));
  }
  Threshold t;
  t.text = text;
  t.collective = text.substr(0, colon);
  check_collective(flag, t.collective);
  t.bytes = parse_bytes(text.substr(colon + 1, eq - colon - 1));
  std::string value = text.substr(eq + 1);
  if (latency) {
    if (value.size() > 2 && value.ends_with("us")) value.resize(value.size() - 2);
    t.max_latency_us = parse_number(flag, value);
  } else {
    t.min_busbw_gbps = parse_number(flag, value);
  }
  return t;
}

std::vector<Threshold> read_threshold_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--thresholds: cannot read \"" + path + "\"");
  std::vector<Threshold> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string kind, spec, extra;
    if (!(words >> kind)) continue;
    if (!(words >> spec) || (words >> extra) || (kind != "min-busbw" && kind != "max-latency")) {
      throw std::invalid_argument(path + ":" + std::to_string(number) +
                                  ": expected \"min-busbw COLL:SIZE=GBPS\" or \"max-latency "
                                  "COLL:SIZE=Nus\"");
    }
    try {
      out.push_back(parse_threshold(spec, kind == "max-latency"));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(path + ":" + std::to_string(number) + ": " + e.what());
    }
  }
  return out;
}

std::string usage() {
  return "usage: ccl-check [-b MIN] [-e MAX] [-f FACTOR] [--iters N] [--warmup N] "
         "[--repeats N]\n"
         "                 [--collectives LIST] [--no-sweep] [--no-pairs] [--pair-bytes N]\n"
         "                 [--latency-factor X] [--bandwidth-fraction F] [--confirm-rounds N]\n"
         "                 [--min-busbw COLL:SIZE=GBPS]... [--max-latency COLL:SIZE=Nus]...\n"
         "                 [--thresholds FILE] [--baseline FILE] [--tolerance PCT]\n"
         "                 [--json FILE] [--junit FILE] [--csv FILE] [--prometheus FILE]\n"
         "                 [--quiet]\n"
         "started on every rank by cclrun, mpirun, srun or torchrun; exit 0 PASS, 1 FAIL, 2 "
         "usage\n";
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "-b" || flag == "--minbytes")
      o.min_bytes = parse_bytes(value());
    else if (flag == "-e" || flag == "--maxbytes")
      o.max_bytes = parse_bytes(value());
    else if (flag == "-f" || flag == "--stepfactor")
      o.factor = static_cast<size_t>(parse_count(flag, value(), 2));
    else if (flag == "--iters")
      o.iters = parse_count(flag, value(), 1);
    else if (flag == "--warmup")
      o.warmup = parse_count(flag, value(), 0);
    else if (flag == "--repeats")
      o.repeats = parse_count(flag, value(), 1);
    else if (flag == "--collectives") {
      o.collectives.clear();
      std::istringstream list(value());
      for (std::string c; std::getline(list, c, ',');) {
        check_collective("--collectives", c);
        o.collectives.push_back(c);
      }
    } else if (flag == "--no-sweep")
      o.sweep = false;
    else if (flag == "--no-pairs")
      o.pairs = false;
    else if (flag == "--pair-bytes")
      o.pair_bytes = parse_bytes(value());
    else if (flag == "--pair-iters")
      o.pair_iters = parse_count(flag, value(), 1);
    else if (flag == "--latency-factor")
      o.rule.latency_factor = parse_number(flag, value());
    else if (flag == "--bandwidth-fraction")
      o.rule.bandwidth_fraction = parse_number(flag, value());
    else if (flag == "--confirm-rounds")
      o.confirm_rounds = parse_count(flag, value(), 1);
    else if (flag == "--min-busbw")
      o.thresholds.push_back(parse_threshold(value(), false));
    else if (flag == "--max-latency")
      o.thresholds.push_back(parse_threshold(value(), true));
    else if (flag == "--thresholds") {
      for (auto& t : read_threshold_file(value())) o.thresholds.push_back(std::move(t));
    } else if (flag == "--baseline")
      o.baseline = value();
    else if (flag == "--tolerance")
      o.baseline_tolerance = parse_number(flag, value()) / 100.0;
    else if (flag == "--json")
      o.json = value();
    else if (flag == "--junit")
      o.junit = value();
    else if (flag == "--csv")
      o.csv = value();
    else if (flag == "--prometheus")
      o.prometheus = value();
    else if (flag == "--quiet")
      o.quiet = true;
    else
      throw std::invalid_argument("unknown flag \"" + flag + "\"");
  }
  if (o.min_bytes > o.max_bytes) throw std::invalid_argument("-b is larger than -e");
  if (o.rule.bandwidth_fraction > 1.0)
    throw std::invalid_argument("--bandwidth-fraction must be <= 1");
  if (o.rule.latency_factor < 1.0) throw std::invalid_argument("--latency-factor must be >= 1");
  return o;
}

}  // namespace ccl_check
