// NVLink between GPUs (and to NVSwitches), read from NVML loaded at run time: Debian's hwloc has no
// NVML plugin, and ccl must neither link nor need NVML. Without NVML (or GPUs) nothing is added.
#pragma once

#include <string>
#include <vector>

#include "topology/topology.h"

namespace ccl::topo {

// One active NVLink lane as a GPU reports it.
struct NvLinkLane {
  int gpu = -1;  // the GPU node reporting it
  std::string
      remote_bus_id;     // the PCI bus id at the other end (any form canonical_pci_bus_id reads)
  unsigned version = 0;  // NVML's NVLink version value (nvmlNvlinkVersion_t), 0: unknown
};

// Bandwidth of one lane in one direction, GB/s, for an NVML NVLink version value.
double nvlink_lane_gbps(unsigned nvml_version);

// Turns lanes into links: the lanes between two GPUs of `topo` (matched by bus_id) merge into one
// GPU-GPU link; a remote end that is no GPU of `topo` is an NVSwitch, one node per distinct bus id
// (reused if `topo` has it, else "nvswitch<i>" under the machine), with one GPU-NvSwitch link per
// GPU. Both GPUs of a pair report their lanes; the side that reports more counts. Returns the
// number of links added.
int add_nvlink_lanes(Topology& topo, const std::vector<NvLinkLane>& lanes);

// Asks NVML (dlopen("libnvidia-ml.so.1")) for the active links of every GPU node of `topo` and
// adds them with add_nvlink_lanes. Returns the number of links added; 0 without NVML or GPUs.
int discover_nvlinks(Topology& topo);

}  // namespace ccl::topo
