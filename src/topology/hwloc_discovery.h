// This machine's topology from hwloc 2.x, or another machine's from its hwloc XML export; both go
// through one converter, so a file from `lstopo --of xml` gives exactly what discovery gives there.
//
// The graph (topology.h): machine -> packages -> NUMA nodes -> cores; host bridges under the
// package or NUMA node hwloc attaches them to (else the machine); below them the PCI tree. Names:
// "package<i>", "numa<os_index>", "core<logical i>", "hostbridge<i>", "pciswitch<i>", "pci<i>",
// "gpu<i>", "nic<i>", "nvswitch<i>" (i counts that type in discovery order).
//
// PCI bridges: a bridge with one child adds no branching (a root port leading to one switch or
// device, a switch port leading to one device), so it is left out and its child hangs from the
// bridge's parent; its link speed still caps the child's link_gbps (the slowest hop counts). A
// bridge with several children is a "pciswitch": a switch's upstream port with its downstream
// ports (each of one child) folded into it, so GPUs behind one switch are siblings.
// GPUs: PCI class 0x0300/0x0302 of vendor 0x10de; os_index is the CUDA device id (the driver's,
// on this machine; from a "cuda<N>" OS device in a file), else -1. NICs: PCI devices with a
// network or OpenFabrics OS device. NVSwitches on PCI (NVIDIA class 0x0680) are "nvswitch<i>" in
// the tree. Other PCI devices stay, as "pci<i>", so the tree shows the machine. NVLink comes from
// NVML (nvml_links.h), for this machine only; it reuses those NVSwitch nodes (matched by bus id).
#pragma once

#include <cstdint>
#include <string>

#include "topology/topology.h"

namespace ccl::topo {

// This machine, discovered with hwloc 2.x (I/O type filter HWLOC_TYPE_FILTER_KEEP_IMPORTANT).
// Built without hwloc: machine -> package0 -> numa0 -> one core per online CPU, with a warning.
Topology discover_local();

// An hwloc XML file (`lstopo --of xml`), converted exactly as discover_local converts this
// machine. InvalidArgument naming the file (and the line, for malformed XML) when it cannot be
// read; InvalidUsage when ccl was built without hwloc.
Topology load_hwloc_xml(const std::string& path);

// The os_index of the NUMA node the calling thread runs on (its binding, else its current CPU); 0
// when unknown.
int current_numa_os_index();

// What discover_local gives without hwloc: machine -> package0 -> numa0 (all the memory) -> cores
// core0..core<cpus-1>, one per CPU. Exposed for the tests.
Topology minimal_topology(int cpus, uint64_t memory_bytes, const std::string& hostname);

}  // namespace ccl::topo
