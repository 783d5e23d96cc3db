// The CUDA devices this process sees, named by PCI bus id, for the topology (which matches them
// with the GPUs hwloc finds). Through the driver table of cuda_driver.h, so that CCL_CUDA=0, a
// machine without the driver and a build without CUDA all mean the same thing here: no devices.
#pragma once

#include <string>
#include <vector>

namespace ccl::cuda {

// The PCI bus id of each device by CUDA ordinal (CUDA_VISIBLE_DEVICES applied), as the driver
// spells it ("0000:3B:00.0"); "" for a device the driver cannot name. Empty where cuda_driver()
// is nullptr. Loads the driver (cuInit) on first use: call it only where there are NVIDIA GPUs.
std::vector<std::string> device_pci_bus_ids();

}  // namespace ccl::cuda
