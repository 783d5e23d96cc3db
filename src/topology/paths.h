// Path classes between two nodes of one machine, named as NCCL names them so that NCCL users read
// ccl's logs and tuner tables without a glossary. They are computed from the Topology alone
// (containment tree plus NVLink/SMP links), best to worst:
//   LOC  the same node
//   NVL  a direct NVLink, or one hop through NVSwitches (GPU-NVSwitch-GPU)
//   NVB  NVLink through an intermediate GPU (GPU-GPU-GPU)
//   PIX  at most one PCI switch between the two (both below the same switch)
//   PXB  several PCI switches, but not through the host bridge
//   PHB  through a PCI host bridge / the CPU of one package
//   SYS  across the SMP interconnect between packages
//   NET  different machines (never returned by path_class; the tuner and tools use it)
// Nodes that are not PCI devices (packages, NUMA nodes, cores) have classes too: a GPU and its own
// package's NUMA node or cores are PHB; a node of another package is SYS. Two NUMA nodes of one
// package are PHB (the traffic stays inside the package and crosses no SMP link; NCCL has no
// separate class for sub-NUMA clustering and treats one CPU as one place).
#pragma once

#include <cstdint>

#include "topology/topology.h"

namespace ccl::topo {

enum class PathClass : uint8_t { LOC, NVL, NVB, PIX, PXB, PHB, SYS, NET };  // best to worst

const char* path_class_name(PathClass c);  // "LOC", "NVL", ...
// Parses a name path_class_name gives (case-insensitive); false if unknown.
bool parse_path_class(const char* text, PathClass* out);

// Between two nodes of one machine (GPUs, NICs, NUMA nodes, cores, PCI devices). Symmetric.
// InvalidArgument for ids that are not nodes of `topo`.
PathClass path_class(const Topology& topo, int a, int b);

// The bottleneck bandwidth of that path in GB/s: the minimum over the links the path uses (a PCI
// node's link_gbps to its parent, an NVLink's or SMP link's gbps); links of unknown bandwidth (0)
// are skipped, 0 when all are unknown or a == b.
double path_bandwidth(const Topology& topo, int a, int b);

}  // namespace ccl::topo
