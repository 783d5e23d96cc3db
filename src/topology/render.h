// Views of one Topology as text: what ccl-topo prints, and what cclGetTopologyText gives tools
// (ccl-check's inventory). Pure functions of the topology, so that the golden files
// (tests/data/*.ccl-topo.txt) pin them down exactly.
#pragma once

#include <string>

#include "topology/topology.h"

namespace ccl::topo {

// The default output: the tree, the links, the path-class matrix and the ring/tree orders.
std::string render_text(const Topology& topo);
// A graphviz digraph: tree edges (labelled with the PCI link's GB/s) and the links.
std::string render_dot(const Topology& topo);

}  // namespace ccl::topo
