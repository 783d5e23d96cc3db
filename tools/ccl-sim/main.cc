// ccl-sim: ccl's own tuner, registry and schedule builders run in virtual time over a model of a
// machine or cluster. For each size of an nccl-tests-style sweep it prints, per (algorithm,
// protocol) the registry has for the shape, the simulated time, algbw and busbw in
// all_reduce_perf's columns, the tuner's pick first and marked '*'.
//
//   ccl-sim --ranks 8 --collective allreduce -b 8 -e 128M -f 2
//   ccl-sim --nodes 64 --per-node 8 --fabric fat-tree --oversub 2 -b 1M -e 1G -f 4 --json out.json
//   ccl-sim --topo tests/data/dgx_h100.xml --nodes 2 --collective allgather -b 1K -e 64M -f 8
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cluster.h"
#include "core/comm/comm_layout.h"
#include "core/tuning/tuner.h"
#include "explain.h"
#include "model.h"
#include "options.h"
#include "plan.h"
#include "report.h"
#include "sweep.h"
#include "topology/topology_xml.h"

namespace {

using namespace ccl;
using namespace ccl::sim;

// Steps of the critical path --explain prints: the first and last half of these.
constexpr size_t kExplainSteps = 40;

struct Args {
  int ranks = 0;
  int nodes = 0;
  int per_node = 0;
  std::string collective = "allreduce";
  size_t min_bytes = 8;
  size_t max_bytes = 128 << 20;
  size_t factor = 2;
  std::string topo;
  std::string fabric = "fat-tree";
  double oversub = 1;
  int nodes_per_leaf = 16;
  int nics = 1;
  std::string algo;
  std::string proto;
  std::string model_file;
  std::string figures = "cache";  // cache | default | FILE
  std::string json;
  bool explain = false;
  bool pick_only = false;
  bool average = false;
  bool no_shm = false;
  int root = 0;
  int calls = 1;
  uint64_t max_ops = kMaxSimulatedOps;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "ccl-sim: %s\n"
      "usage: ccl-sim [--ranks N | --nodes N --per-node G] [--collective allreduce|broadcast|"
      "reduce|allgather|reducescatter|alltoall] [-b MIN] [-e MAX] [-f FACTOR] [--topo FILE] "
      "[--fabric fat-tree|rail] [--oversub R] [--nodes-per-leaf K] [--nics K] [--algo A] "
      "[--proto P] [--model FILE] [--figures cache|default|FILE] [--op sum|avg] [-r ROOT] "
      "[--no-shm] [--pick-only] [--calls K] [--max-ops N] [--json FILE] [--explain]\n",
      why.c_str());
  std::exit(2);
}

int to_int(const std::string& flag, const char* text, int min) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < min || v > (1 << 20)) {
    usage(flag + " wants an integer >= " + std::to_string(min) + ", not \"" + text + "\"");
  }
  return static_cast<int>(v);
}

size_t to_size(const std::string& flag, const char* text) {
  const double v = perf::parse_size(text);
  if (v < 0) usage(flag + " wants a size (8, 64K, 1M, 2G), not \"" + text + "\"");
  return static_cast<size_t>(v);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--ranks" || flag == "-n") {
      a.ranks = to_int(flag, value(), 1);
    } else if (flag == "--nodes") {
      a.nodes = to_int(flag, value(), 1);
    } else if (flag == "--per-node") {
      a.per_node = to_int(flag, value(), 1);
    } else if (flag == "--collective") {
      a.collective = value();
    } else if (flag == "-b" || flag == "--minbytes") {
      a.min_bytes = to_size(flag, value());
    } else if (flag == "-e" || flag == "--maxbytes") {
      a.max_bytes = to_size(flag, value());
    } else if (flag == "-f" || flag == "--stepfactor") {
      a.factor = static_cast<size_t>(to_int(flag, value(), 2));
    } else if (flag == "--topo") {
      a.topo = value();
    } else if (flag == "--fabric") {
      a.fabric = value();
    } else if (flag == "--oversub") {
      char* end = nullptr;
      const char* text = value();
      a.oversub = std::strtod(text, &end);
      if (*end != '\0' || !(a.oversub >= 1)) usage("--oversub wants a ratio >= 1");
    } else if (flag == "--nodes-per-leaf") {
      a.nodes_per_leaf = to_int(flag, value(), 1);
    } else if (flag == "--nics") {
      a.nics = to_int(flag, value(), 1);
    } else if (flag == "--algo") {
      a.algo = value();
    } else if (flag == "--proto") {
      a.proto = value();
    } else if (flag == "--model") {
      a.model_file = value();
    } else if (flag == "--figures") {
      a.figures = value();
    } else if (flag == "--json") {
      a.json = value();
    } else if (flag == "--op" || flag == "-o") {
      const std::string op = value();
      if (op != "sum" && op != "avg") usage("--op is sum or avg, not \"" + op + "\"");
      a.average = op == "avg";
    } else if (flag == "-r" || flag == "--root") {
      a.root = to_int(flag, value(), 0);
    } else if (flag == "--max-ops") {
      a.max_ops = to_size(flag, value());  // 64M: 64 Mi ops
      if (a.max_ops < 1) usage("--max-ops wants a count of ops >= 1 (64M, 1G)");
    } else if (flag == "--calls") {
      a.calls = to_int(flag, value(), 1);
    } else if (flag == "--explain") {
      a.explain = true;
    } else if (flag == "--pick-only") {
      a.pick_only = true;
    } else if (flag == "--no-shm") {
      a.no_shm = true;
    } else {
      usage("unknown flag \"" + flag + "\"");
    }
  }
  if (a.fabric != "fat-tree" && a.fabric != "rail") {
    usage("--fabric is fat-tree or rail, not \"" + a.fabric + "\"");
  }
  if (a.min_bytes > a.max_bytes) usage("-b must not exceed -e");
  return a;
}

// The collective's name in nccl-tests' terms, for geometry and busbw.
perf::Collective perf_collective(tune::Collective c) {
  switch (c) {
    case tune::Collective::AllReduce:
      return perf::Collective::AllReduce;
    case tune::Collective::Broadcast:
      return perf::Collective::Broadcast;
    case tune::Collective::Reduce:
      return perf::Collective::Reduce;
    case tune::Collective::AllGather:
      return perf::Collective::AllGather;
    case tune::Collective::ReduceScatter:
      return perf::Collective::ReduceScatter;
    case tune::Collective::AlltoAll:
      return perf::Collective::AlltoAll;
    case tune::Collective::Barrier:
      break;
  }
  usage("ccl-sim simulates allreduce, broadcast, reduce, allgather, reducescatter, alltoall");
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    tune::Collective collective;
    if (!tune::parse_collective(args.collective, &collective)) {
      usage("--collective: unknown collective \"" + args.collective + "\"");
    }
    const perf::Collective pcoll = perf_collective(collective);

    // The cluster: a machine file times --nodes, or --nodes x --per-node, or --ranks on one host.
    ClusterSpec spec;
    spec.nodes = args.nodes > 0 ? args.nodes : 1;
    spec.per_node = args.per_node > 0 ? args.per_node : (args.ranks > 0 ? args.ranks : 2);
    if (args.ranks > 0 && args.nodes > 0 && args.per_node == 0) {
      if (args.ranks % args.nodes != 0) usage("--ranks must be a multiple of --nodes");
      spec.per_node = args.ranks / args.nodes;
    }
    spec.fabric = args.fabric == "rail" ? ClusterSpec::Fabric::Rail : ClusterSpec::Fabric::FatTree;
    spec.oversubscription = args.oversub;
    spec.nodes_per_leaf = args.nodes_per_leaf;
    spec.nics_per_node = args.nics;
    spec.shm = !args.no_shm;

    const size_t chunk_bytes = size_t{1} << 20;   // CCL_BUFFSIZE (4M) / 4, the default chunk
    const size_t window_bytes = size_t{1} << 20;  // CCL_SHM_WINDOW's default
    if (!args.topo.empty()) {
      spec = Cluster::spec_from_topology(topo::load_topology_file(args.topo), spec.nodes, spec);
    }
    check_spec(spec);
    // The figures the tuner of a real run of this shape would use: this host's cache (what
    // ccl measured here), a file, or the defaults.
    const tune::Shape shape = Cluster::shape_of(spec, window_bytes, chunk_bytes);
    tune::Figures figures = tune::default_figures();
    std::string source = args.figures;
    if (args.figures == "cache") {
      figures = figures_for(shape, &source);
    } else if (args.figures != "default") {
      figures = tune::read_figures_file(args.figures);
    }
    SimModel model = from_figures(figures);
    if (!args.model_file.empty()) model = read_model_file(args.model_file, model);
    const Cluster cluster(spec, model);

    const tune::Tuner tuner(shape, figures, tune::Selection::parse(args.algo, args.proto));
    const auto layout = CommLayout::build(cluster.places());
    const int n = cluster.nranks();

    std::printf("# ccl-sim: %s, %d ranks\n", tune::collective_name(collective), n);
    std::printf("%s", cluster.describe().c_str());
    std::printf("# the tuner's figures: %s\n", source.c_str());
    std::printf("%s", perf::column_header(false).c_str());

    nlohmann::json results = nlohmann::json::array();
    std::string explanation;
    double busbw_sum = 0;
    int busbw_rows = 0;
    const std::vector<size_t> sizes =
        perf::size_sweep(args.min_bytes, args.max_bytes, 0, args.factor);
    for (size_t bytes : sizes) {
      const perf::Geometry g = perf::geometry(pcoll, bytes, 4, n);
      const size_t call_bytes = g.param_count * 4;
      Call call;
      call.collective = collective;
      call.count = g.param_count;
      call.root = args.root % n;
      call.average = args.average;
      call.calls = args.calls;
      call.max_ops = args.max_ops;
      for (const Candidate& c : candidates(tuner, collective, call_bytes, !args.pick_only)) {
        // --explain traces the pick at the largest size: its critical path follows the rows.
        const bool trace = args.explain && c.pick && bytes == sizes.back();
        // The in-place run on a second thread: the two are independent (each its own engine
        // over the same const cluster), and a large job's runs take minutes.
        Call in_place_call = call;
        in_place_call.in_place = true;
        auto in_place_run = std::async(std::launch::async, [&] {
          return run_candidate(cluster, c, in_place_call, layout.host_of_rank, layout.ring_order,
                               layout.tree_order);
        });
        const Outcome out = run_candidate(cluster, c, call, layout.host_of_rank, layout.ring_order,
                                          layout.tree_order, trace);
        const Outcome in_place = in_place_run.get();
        const double algbw = perf::alg_bandwidth(pcoll, g, 4, n, out.time_us * 1e-6);
        const double busbw = perf::bus_bandwidth(pcoll, algbw, n);
        const double ip_algbw = perf::alg_bandwidth(pcoll, g, 4, n, in_place.time_us * 1e-6);
        const double ip_busbw = perf::bus_bandwidth(pcoll, ip_algbw, n);
        const bool rooted =
            pcoll == perf::Collective::Broadcast || pcoll == perf::Collective::Reduce;
        std::printf("%s%s%s  %s%s%s\n",
                    perf::row_preamble(perf::row_bytes(g, 4), g.param_count, "float",
                                       args.average ? "avg" : "sum", rooted ? call.root : -1)
                        .c_str(),
                    perf::row_body(out.time_us, algbw, busbw, std::nullopt).c_str(),
                    perf::row_body(in_place.time_us, ip_algbw, ip_busbw, std::nullopt).c_str(),
                    candidate_name(c).c_str(), c.pick ? " *" : "",
                    out.simulated ? "" : (" (" + out.note + ")").c_str());
        std::fflush(stdout);  // a row at a time: a large sweep takes minutes
        if (args.explain && out.simulated) {
          std::printf("#   %d ranks run, last rank %d at %.2f us, %llu messages, %llu events\n",
                      out.ranks_run, out.detail.last_rank, out.detail.time_us,
                      static_cast<unsigned long long>(out.detail.messages),
                      static_cast<unsigned long long>(out.detail.events));
        }
        if (trace) {
          explanation = "# --explain: " + candidate_name(c) + ", " +
                        std::to_string(perf::row_bytes(g, 4)) + " bytes, out of place\n" +
                        (out.simulated ? describe_path(out.detail, cluster, kExplainSteps)
                                       : "# not simulated: " + out.note + "\n");
        }
        if (c.pick) {
          busbw_sum += busbw;
          ++busbw_rows;
        }
        results.push_back({{"collective", tune::collective_name(collective)},
                           {"bytes", perf::row_bytes(g, 4)},
                           {"ranks", n},
                           {"calls", args.calls},
                           {"algorithm", tune::algorithm_name(c.entry->algorithm)},
                           {"protocol", tune::protocol_name(c.protocol)},
                           {"pick", c.pick},
                           {"simulated", out.simulated},
                           {"ranks_run", out.ranks_run},
                           {"time_us", out.time_us},
                           {"algbw", algbw},
                           {"busbw", busbw},
                           {"predicted_us", c.predicted_us}});
      }
    }
    std::printf("%s", perf::footer(0, busbw_rows ? busbw_sum / busbw_rows : 0).c_str());
    std::printf("%s", explanation.c_str());
    if (!args.json.empty()) {
      std::ofstream out(args.json);
      out << nlohmann::json{{"program", "ccl-sim"}, {"results", results}}.dump(1) << "\n";
      if (!out) throw Error(cclSystemError, "ccl-sim: cannot write " + args.json);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccl-sim: %s\n", e.what());
    return 1;
  }
}
