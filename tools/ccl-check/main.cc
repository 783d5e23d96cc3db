// ccl-check: the cluster acceptance harness. Started on every rank (cclrun, mpirun, srun,
// torchrun); measures the collectives and every pair of ranks, judges them against thresholds, a
// baseline and each other, and prints one line per host, PASS or FAIL with a code and a reason.
// Exit 0 when everything passed, 1 when a check failed (or the run could not start), 2 for bad
// usage. docs/ccl-check.md says how to run it on a cluster.
#include <unistd.h>

#include <algorithm>
#include <ccl/ccl.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "measure.h"
#include "options.h"
#include "pair_rounds.h"
#include "report.h"
#include "suspects.h"

extern char** environ;

namespace {

using namespace ccl_check;
using Clock = std::chrono::steady_clock;

// The host this rank runs on: CCL_HOSTID when set (what ccl itself uses to tell hosts apart, and
// what a namespace "cluster" sets per node), else the host name.
std::string host_label() {
  if (const char* id = std::getenv("CCL_HOSTID"); id != nullptr && *id != '\0') return id;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// Every rank's host label, on every rank (fixed 64-byte slots through an allgather).
std::vector<std::string> gather_hosts(ccl::Communicator& comm, const std::string& mine) {
  constexpr size_t kSlot = 64;
  std::vector<char> slot(kSlot, '\0'), all(kSlot * static_cast<size_t>(comm.size()));
  std::memcpy(slot.data(), mine.data(), std::min(mine.size(), kSlot - 1));
  comm.all_gather(std::span<const char>(slot), std::span<char>(all));
  std::vector<std::string> hosts;
  for (int r = 0; r < comm.size(); ++r)
    hosts.emplace_back(all.data() + static_cast<size_t>(r) * kSlot);
  return hosts;
}

nlohmann::json ccl_environment() {
  nlohmann::json env = nlohmann::json::object();
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (!kv.starts_with("CCL_") || kv.starts_with("CCL_COMM_SECRET")) continue;  // no secrets
    const auto eq = kv.find('=');
    env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  return env;
}

void progress(bool show, const std::string& what) {
  if (!show) return;
  std::fprintf(stderr, "ccl-check: %s\n", what.c_str());
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// The pairs that are slow, confirmed: suspects (find_suspects) among the pairs of their own kind
// (inside a host, shared memory, against each other; between hosts, the network, against each
// other), each retested alone, with every other rank waiting, against its kind's best pairs
// measured alone too, so that a pair slow only because its round shared a switch or a core is
// not reported. Collective: every rank calls it with the same pairs.
std::vector<size_t> confirm_slow_pairs(ccl::Communicator& comm,
                                       const std::vector<PairResult>& pairs,
                                       const std::vector<std::string>& hosts, const Options& o,
                                       bool show) {
  std::vector<size_t> confirmed;
  for (const bool inside : {true, false}) {
    std::vector<size_t> kind;  // indices into pairs
    for (size_t i = 0; i < pairs.size(); ++i) {
      const bool same = hosts[static_cast<size_t>(pairs[i].ranks.first)] ==
                        hosts[static_cast<size_t>(pairs[i].ranks.second)];
      if (same == inside) kind.push_back(i);
    }
    if (kind.empty()) continue;
    std::vector<PairResult> of_kind;
    for (const size_t i : kind) of_kind.push_back(pairs[i]);
    const auto suspects = find_suspects(of_kind, o.rule);
    if (suspects.empty()) continue;
    size_t fastest_pair = 0, best_pair = 0;
    for (size_t i = 0; i < of_kind.size(); ++i) {
      if (of_kind[i].latency_us < of_kind[fastest_pair].latency_us) fastest_pair = i;
      if (of_kind[i].bandwidth_gbps > of_kind[best_pair].bandwidth_gbps) best_pair = i;
    }
    progress(show, std::string("pairs: the best pairs ") +
                       (inside ? "inside hosts" : "between hosts") + " alone, for reference");
    const PairResult a = measure_round(comm, {of_kind[fastest_pair].ranks}, o).front();
    const PairResult b =
        best_pair == fastest_pair ? a : measure_round(comm, {of_kind[best_pair].ranks}, o).front();
    const double fastest = std::min(a.latency_us, b.latency_us);
    const double best = std::max(a.bandwidth_gbps, b.bandwidth_gbps);
    for (const Suspect& s : suspects) {
      const RankPair ranks = of_kind[s.index].ranks;
      progress(show, "pairs: retesting " + std::to_string(ranks.first) + "-" +
                         std::to_string(ranks.second) + " alone (" + s.reason + ")");
      const PairResult again = measure_round(comm, {ranks}, o).front();
      if (again.latency_us > o.rule.latency_factor * fastest ||
          again.bandwidth_gbps < o.rule.bandwidth_fraction * best) {
        confirmed.push_back(kind[s.index]);
      }
    }
  }
  return confirmed;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "ccl-check: %s\n%s", e.what(), usage().c_str());
    return 2;
  }
  nlohmann::json baseline;
  if (!o.baseline.empty()) {
    std::ifstream in(o.baseline);
    try {
      baseline = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ccl-check: --baseline %s: not a ccl-check JSON report (%s)\n",
                   o.baseline.c_str(), e.what());
      return 2;
    }
  }
  const auto started = Clock::now();
  try {
    ccl::Communicator comm = ccl::Communicator::from_env();
    const bool root = comm.rank() == 0;
    const bool show = root && !o.quiet;
    const std::vector<std::string> hosts = gather_hosts(comm, host_label());

    std::vector<SweepPoint> sweep;
    if (o.sweep) {
      progress(show, "sweep: " + std::to_string(o.collectives.size()) + " collectives, " +
                         size_text(o.min_bytes) + " to " + size_text(o.max_bytes));
      sweep = run_sweep(comm, o);
    }
    std::vector<PairResult> pairs;
    std::vector<size_t> confirmed;
    // More ranks on a host than it has cores: ranks wait for a core, not for the network, so a
    // round's pairs are measured one at a time and latencies are not judged (they measure the
    // scheduler). Any host crowded makes the whole run so, since every rank must agree.
    std::vector<double> crowded = {
        static_cast<double>(
            std::count(hosts.begin(), hosts.end(), hosts[static_cast<size_t>(comm.rank())])) >
                std::max(1u, std::thread::hardware_concurrency())
            ? 1.0
            : 0.0};
    comm.all_reduce(std::span<double>(crowded), cclMax);
    Options po = o;
    if (crowded[0] > 0) {
      po.rule.latency_factor = std::numeric_limits<double>::infinity();
      if (root) {
        std::fprintf(stderr,
                     "ccl-check: a host runs more ranks than it has cores: pairs are "
                     "measured one at a time and their latencies are not judged\n");
      }
    }
    if (o.pairs && comm.size() > 1) {
      auto rounds = pair_rounds(comm.size());
      if (crowded[0] > 0) {
        std::vector<std::vector<RankPair>> one_at_a_time;
        for (const auto& round : rounds) {
          for (const auto& p : round) one_at_a_time.push_back({p});
        }
        rounds = std::move(one_at_a_time);
      }
      for (size_t r = 0; r < rounds.size(); ++r) {
        progress(show,
                 "pairs: round " + std::to_string(r + 1) + " of " + std::to_string(rounds.size()));
        for (auto& p : measure_round(comm, rounds[r], po)) pairs.push_back(p);
      }
      confirmed = confirm_slow_pairs(comm, pairs, hosts, po, show);
    }
    const auto culprits = blame(pairs, confirmed, hosts);

    std::vector<Check> checks = sweep_checks(sweep, o.thresholds, baseline, o.baseline_tolerance);
    if (o.pairs && comm.size() > 1) {
      for (auto& c : pair_checks(culprits, pairs.size())) checks.push_back(std::move(c));
    }
    const bool passed = all_passed(checks);
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (root) {
      std::fputs(verdict_lines(hosts, checks).c_str(), stdout);
      std::fflush(stdout);
      nlohmann::json report = {{"tool", "ccl-check"},
                               {"ccl_version", ccl::version()},
                               {"ranks", comm.size()},
                               {"host_of_rank", hosts},
                               {"environment", ccl_environment()},
                               {"options",
                                {{"min_bytes", o.min_bytes},
                                 {"max_bytes", o.max_bytes},
                                 {"iters", o.iters},
                                 {"repeats", o.repeats},
                                 {"pair_bytes", o.pair_bytes},
                                 {"latency_factor", po.rule.latency_factor},
                                 {"crowded_hosts", crowded[0] > 0},
                                 {"bandwidth_fraction", o.rule.bandwidth_fraction}}},
                               {"sweep", to_json(sweep)},
                               {"pairs", to_json(pairs, hosts)},
                               {"checks", to_json(checks)},
                               {"verdict", passed ? "PASS" : "FAIL"},
                               {"seconds", seconds}};
      bool ok = true;
      if (!o.json.empty()) ok = write_file(o.json, report.dump(2) + "\n") && ok;
      if (!o.junit.empty()) ok = write_file(o.junit, to_junit(checks, seconds)) && ok;
      if (!o.csv.empty()) ok = write_file(o.csv, to_csv(sweep)) && ok;
      if (!ok) {
        std::fprintf(stderr, "ccl-check: could not write a report file\n");
        return 1;
      }
    }
    return passed ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccl-check: FAIL: %s\n", e.what());
    return 1;
  }
}
