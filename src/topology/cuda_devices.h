// CUDA device ids of this machine's GPUs, from ccl's CUDA driver table (src/cuda: the driver loaded
// at run time, so ccl neither links nor needs CUDA): a machine without the driver, a job with
// CCL_CUDA=0 and a build without CUDA have no ids.
#pragma once

#include <map>
#include <string>

#include "topology/topology.h"

namespace ccl::topo {

// A PCI bus id in the one form ccl compares and stores: lowercase hex "dddd:bb:dd.f" (the domain
// at least 4 digits). Accepts what hwloc, CUDA ("0000:3B:00.0") and NVML ("00000000:3b:00.0")
// write, and "bb:dd.f" (domain 0). "" when `text` is not a bus id.
std::string canonical_pci_bus_id(const std::string& text);

// Canonical PCI bus id -> CUDA device id (as this process sees them, CUDA_VISIBLE_DEVICES
// applied), from cuda::device_pci_bus_ids(). Empty, without error, where there is no driver or
// no device. Loads the driver (cuInit): use it only where the machine has NVIDIA GPUs.
std::map<std::string, int> cuda_device_ids();

// Sets the os_index of every GPU node of `topo` to its CUDA device id in this process, matched by
// bus id through cuda_device_ids() (-1 for a GPU the process does not see). Returns how many GPUs
// got an id. Loads the driver only if `topo` has GPUs.
int name_gpus_by_cuda_id(Topology& topo);

}  // namespace ccl::topo
