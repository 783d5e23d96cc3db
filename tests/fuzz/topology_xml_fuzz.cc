// ccl's topology file format (topology/topology_xml.h) from arbitrary text: CCL_TOPO_FILE and
// ccl-topo --file read files users write by hand. A topology that parses is then used as the
// library uses one (device lists, ring and tree orders, locality keys, path classes), and must
// survive a write-read round trip unchanged.
#include "base/error.h"
#include "fuzz_check.h"
#include "topology/orders.h"
#include "topology/paths.h"
#include "topology/topology_xml.h"

using namespace ccl;
using namespace ccl::topo;

namespace {

// What comm init and the tools do with a machine's topology. Devices are capped so that one
// input stays fast (the pair loop is quadratic).
void use(const Topology& t) {
  std::vector<int> devices = rank_devices(t);
  if (devices.size() > 8) devices.resize(8);
  for (int d : devices) FUZZ_CHECK(d >= 0 && d < static_cast<int>(t.nodes().size()));
  // Two ranks on each device, as when ranks share a NUMA node.
  std::vector<int> ranks = devices;
  ranks.insert(ranks.end(), devices.begin(), devices.end());
  for (const auto& order : {ring_order(t, ranks), tree_order(t, ranks)}) {
    FUZZ_CHECK(order.size() == ranks.size());
    std::vector<bool> seen(order.size());
    for (int i : order) {
      FUZZ_CHECK(i >= 0 && i < static_cast<int>(order.size()) && !seen[i]);
      seen[i] = true;
    }
  }
  std::vector<RankPlace> places;
  for (int d : ranks) places.push_back(RankPlace{"host", locality_key(t, d)});
  FUZZ_CHECK(rank_ring_order(places).size() == places.size());
  FUZZ_CHECK(rank_tree_order(places).size() == places.size());
  for (int a : devices) {
    for (int b : devices) {
      FUZZ_CHECK(path_class(t, a, b) == path_class(t, b, a));
      FUZZ_CHECK(path_bandwidth(t, a, b) >= 0);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Topology t;
  try {
    t = from_xml(text, "fuzz.xml");
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == cclInvalidArgument);
    return 0;
  }
  use(t);
  // Whatever the reader accepts, the writer can write, and reading that back gives the canonical
  // text again.
  const std::string canonical = to_xml(t);
  const Topology again = from_xml(canonical, "canonical.xml");
  FUZZ_CHECK(to_xml(again) == canonical);
  FUZZ_CHECK(again.nodes().size() == t.nodes().size() && again.links().size() == t.links().size());
  return 0;
}
