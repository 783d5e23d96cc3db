// CUDA device ids of this machine's GPUs, read from the CUDA driver loaded at run time, so that ccl
// neither links nor needs CUDA: a machine without the driver simply has no ids.
#pragma once

#include <map>
#include <string>

namespace ccl::topo {

// A PCI bus id in the one form ccl compares and stores: lowercase hex "dddd:bb:dd.f" (the domain
// at least 4 digits). Accepts what hwloc, CUDA ("0000:3B:00.0") and NVML ("00000000:3b:00.0")
// write, and "bb:dd.f" (domain 0). "" when `text` is not a bus id.
std::string canonical_pci_bus_id(const std::string& text);

// Canonical PCI bus id -> CUDA device id (as this process sees them, CUDA_VISIBLE_DEVICES
// applied), from dlopen("libcuda.so.1"). Empty, without error, when the driver is absent or has
// no devices. Calls cuInit: use it only where the machine has NVIDIA GPUs.
std::map<std::string, int> cuda_device_ids();

}  // namespace ccl::topo
