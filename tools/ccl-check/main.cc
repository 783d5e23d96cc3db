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
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/replace_file.h"
#include "inventory.h"
#include "measure.h"
#include "options.h"
#include "pair_rounds.h"
#include "progress.h"
#include "prometheus.h"
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

// The machine this rank runs on: the kernel's boot id (one per running kernel, shared by every
// namespace and container on it), else the host label.
std::string machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (std::getline(in, id) && !id.empty()) return id;
  return host_label();
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

// The inventory, briefly (the JSON report has all of it): hosts and ranks, transports per pair.
void print_inventory(const Inventory& inv) {
  std::string line = "ccl-check: " + std::to_string(inv.topology_of_host.size()) + " host(s), " +
                     std::to_string(inv.host_of_rank.size()) + " rank(s); pairs by transport:";
  for (const auto& [name, count] : transport_counts(inv)) {
    line += " " + name + " " + std::to_string(count);
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

double slowest_pair_gbps(const std::vector<PairResult>& pairs) {
  double slowest = std::numeric_limits<double>::infinity();
  for (const auto& p : pairs) slowest = std::min(slowest, p.bandwidth_gbps);
  return pairs.empty() ? 0.0 : slowest;
}

// The ring beside the pairs: the same transfer, all ranks at once against each pair alone.
void print_ring(const RingResult& ring, const std::vector<PairResult>& pairs, int nranks) {
  const double slowest = slowest_pair_gbps(pairs);
  std::fprintf(stderr,
               "ccl-check: ring of all %d ranks: %.2f GB/s per rank (slowest: rank %d); the "
               "slowest pair alone: %.2f GB/s (ring/pair %.2fx)\n",
               nranks, ring.bandwidth_gbps, ring.slowest_rank, slowest,
               slowest > 0 ? ring.bandwidth_gbps / slowest : 0.0);
}

nlohmann::json ring_json(const RingResult& ring, const std::vector<PairResult>& pairs) {
  const double slowest = slowest_pair_gbps(pairs);
  return {{"bytes", ring.bytes},
          {"time_us", ring.time_us},
          {"bandwidth_gbps", ring.bandwidth_gbps},
          {"slowest_rank", ring.slowest_rank},
          {"slowest_pair_gbps", slowest},
          {"ring_over_slowest_pair", slowest > 0 ? ring.bandwidth_gbps / slowest : 0.0}};
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// The pairs that are slow, confirmed: suspects (find_suspects) among the pairs of their own kind
// (inside a host, shared memory, against each other; between hosts, the network, against each
// other), each retested alone in o.confirm_rounds rounds, every other rank waiting, beside a
// reference measured alone in the same rounds (the kind's best pair that is no suspect, before
// the suspect in odd rounds and after it in even ones, so that drift hits both alike). A suspect
// is confirmed only when it breaks the rule against that round's reference in every round: a
// pair slow in one round because that round shared a core or a switch with other work (on a
// noisy machine, clean links vary by 15% and more: 3.7-4.4 GB/s here) is not reported, while a
// link at a fifth of the others breaks it every time. Collective: every rank calls it with the
// same pairs.
std::vector<size_t> confirm_slow_pairs(ccl::Communicator& comm,
                                       const std::vector<PairResult>& pairs,
                                       const std::vector<std::string>& hosts, const Options& o,
                                       Progress& progress) {
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
    std::vector<bool> suspect(of_kind.size(), false);
    for (const Suspect& s : suspects) suspect[s.index] = true;
    // The reference: the best pair that is no suspect (every pair suspect: the best of all).
    size_t reference = of_kind.size();
    for (size_t i = 0; i < of_kind.size(); ++i) {
      if (suspect[i]) continue;
      if (reference == of_kind.size() ||
          of_kind[i].bandwidth_gbps > of_kind[reference].bandwidth_gbps) {
        reference = i;
      }
    }
    if (reference == of_kind.size()) {
      reference = 0;
      for (size_t i = 1; i < of_kind.size(); ++i) {
        if (of_kind[i].bandwidth_gbps > of_kind[reference].bandwidth_gbps) reference = i;
      }
    }
    const RankPair ref = of_kind[reference].ranks;
    progress.add_to_plan(static_cast<int>(suspects.size()));
    for (const Suspect& s : suspects) {
      const RankPair ranks = of_kind[s.index].ranks;
      progress.step("pairs: retesting " + std::to_string(ranks.first) + "-" +
                    std::to_string(ranks.second) + " alone beside " + std::to_string(ref.first) +
                    "-" + std::to_string(ref.second) + ", " + std::to_string(o.confirm_rounds) +
                    " rounds (" + s.reason + ")");
      if (ranks == ref) continue;  // the best pair of all is slow against nothing
      int broken = 0;
      for (int round = 0; round < o.confirm_rounds; ++round) {
        PairResult mine, theirs;
        if (round % 2 == 0) {
          theirs = measure_round(comm, {ref}, o).front();
          mine = measure_round(comm, {ranks}, o).front();
        } else {
          mine = measure_round(comm, {ranks}, o).front();
          theirs = measure_round(comm, {ref}, o).front();
        }
        broken += mine.latency_us > o.rule.latency_factor * theirs.latency_us ||
                  mine.bandwidth_gbps < o.rule.bandwidth_fraction * theirs.bandwidth_gbps;
      }
      if (broken == o.confirm_rounds) confirmed.push_back(kind[s.index]);
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
    Progress progress(root && !o.quiet, stderr);
    const bool measure_pairs = o.pairs && comm.size() > 1;
    const int sweep_steps =
        o.sweep ? static_cast<int>(o.collectives.size() * sweep_sizes(o).size()) : 0;
    progress.plan(1 + sweep_steps +
                  (measure_pairs ? static_cast<int>(pair_rounds(comm.size()).size()) + 1 : 0));
    progress.step("inventory: hosts, topology, transports");
    const Inventory inventory = gather_inventory(comm, host_label());
    const std::vector<std::string>& hosts = inventory.host_of_rank;

    std::vector<SweepPoint> sweep;
    if (o.sweep) {
      sweep =
          run_sweep(comm, o, [&](const std::string& point) { progress.step("sweep: " + point); });
    }
    std::vector<PairResult> pairs;
    std::vector<size_t> confirmed;
    // More ranks on a machine than it has cores: ranks wait for a core, not for the network, so
    // a round's pairs are measured one at a time and latencies are not judged (they measure the
    // scheduler). Machines are told apart by their kernel's boot id, not by host label: the
    // "hosts" of a namespace cluster (or containers) share one machine's cores. Any machine
    // crowded makes the whole run so, since every rank must agree.
    const std::vector<std::string> machines = gather_strings(comm, machine_id());
    std::vector<double> crowded = {
        static_cast<double>(std::count(machines.begin(), machines.end(),
                                       machines[static_cast<size_t>(comm.rank())])) >
                std::max(1u, std::thread::hardware_concurrency())
            ? 1.0
            : 0.0};
    comm.all_reduce(std::span<double>(crowded), cclMax);
    Options po = o;
    if (crowded[0] > 0) {
      po.rule.latency_factor = std::numeric_limits<double>::infinity();
      progress.note(
          "a host runs more ranks than it has cores: pairs are measured one at a time and their "
          "latencies are not judged");
    }
    std::optional<RingResult> ring;
    if (measure_pairs) {
      auto rounds = pair_rounds(comm.size());
      if (crowded[0] > 0) {
        std::vector<std::vector<RankPair>> one_at_a_time;
        for (const auto& round : rounds) {
          for (const auto& p : round) one_at_a_time.push_back({p});
        }
        progress.add_to_plan(static_cast<int>(one_at_a_time.size() - rounds.size()));
        rounds = std::move(one_at_a_time);
      }
      for (size_t r = 0; r < rounds.size(); ++r) {
        progress.step("pairs: round " + std::to_string(r + 1) + " of " +
                      std::to_string(rounds.size()));
        for (auto& p : measure_round(comm, rounds[r], po)) pairs.push_back(p);
      }
      confirmed = confirm_slow_pairs(comm, pairs, hosts, po, progress);
      progress.step("ring: all " + std::to_string(comm.size()) + " ranks at once");
      ring = measure_ring(comm, po);
    }
    const auto culprits = blame(pairs, confirmed, hosts, po.rule);

    std::vector<Check> checks = sweep_checks(sweep, o.thresholds, baseline, o.baseline_tolerance);
    if (measure_pairs) {
      for (auto& c : pair_checks(culprits, pairs.size())) checks.push_back(std::move(c));
    }
    const bool passed = all_passed(checks);
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    progress.finish();
    if (root) {
      print_inventory(inventory);
      if (ring) print_ring(*ring, pairs, comm.size());
      std::fputs(verdict_lines(hosts, checks).c_str(), stdout);
      std::fflush(stdout);
      nlohmann::json report = {{"tool", "ccl-check"},
                               {"ccl_version", ccl::version()},
                               {"ranks", comm.size()},
                               {"host_of_rank", hosts},
                               {"environment", ccl_environment()},
                               {"inventory", to_json(inventory)},
                               {"ring", ring ? ring_json(*ring, pairs) : nlohmann::json()},
                               {"options",
                                {{"min_bytes", o.min_bytes},
                                 {"max_bytes", o.max_bytes},
                                 {"iters", o.iters},
                                 {"repeats", o.repeats},
                                 {"pair_bytes", o.pair_bytes},
                                 {"latency_factor", po.rule.latency_factor},
                                 {"crowded_hosts", crowded[0] > 0},
                                 {"bandwidth_fraction", o.rule.bandwidth_fraction},
                                 {"confirm_rounds", o.confirm_rounds}}},
                               {"sweep", to_json(sweep)},
                               {"pairs", to_json(pairs, hosts)},
                               {"checks", to_json(checks)},
                               {"verdict", passed ? "PASS" : "FAIL"},
                               {"seconds", seconds}};
      bool ok = true;
      if (!o.json.empty()) ok = write_file(o.json, report.dump(2) + "\n") && ok;
      if (!o.junit.empty()) ok = write_file(o.junit, to_junit(checks, seconds)) && ok;
      if (!o.csv.empty()) ok = write_file(o.csv, to_csv(sweep)) && ok;
      if (!o.prometheus.empty()) {
        const double now =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        const PrometheusReport prometheus{hosts, sweep, pairs, ring, checks, seconds, now};
        // Replaced whole, as node_exporter's textfile collector needs.
        const std::string error = ccl::replace_file(o.prometheus, to_prometheus(prometheus));
        if (!error.empty()) std::fprintf(stderr, "ccl-check: --prometheus: %s\n", error.c_str());
        ok = error.empty() && ok;
      }
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
