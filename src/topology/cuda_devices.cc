#include "topology/cuda_devices.h"

#include <dlfcn.h>

#include <cstdio>
#include <regex>

#include "core/log.h"

namespace ccl::topo {

namespace {

// The few driver entry points used, declared here so that no CUDA header is needed to build.
// CUresult is an int (0: CUDA_SUCCESS); CUdevice is an int handle.
using CuInit = int (*)(unsigned int flags);
using CuDeviceGetCount = int (*)(int* count);
using CuDeviceGet = int (*)(int* device, int ordinal);
using CuDeviceGetPciBusId = int (*)(char* bus_id, int len, int device);

template <typename F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

std::string canonical_pci_bus_id(const std::string& text) {
  // [domain:]bus:device.function, in hex; sscanf would let "0x" prefixes and trailing text by.
  static const std::regex form(
      "(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\\.([0-7])");
  std::smatch m;
  if (!std::regex_match(text, m, form)) return "";
  const unsigned long domain = m[1].matched ? std::stoul(m[1].str(), nullptr, 16) : 0;
  const unsigned long dev = std::stoul(m[3].str(), nullptr, 16);
  if (dev > 0x1f) return "";
  char out[32];
  std::snprintf(out, sizeof(out), "%04lx:%02lx:%02lx.%s", domain,
                std::stoul(m[2].str(), nullptr, 16), dev, m[4].str().c_str());
  return out;
}

std::map<std::string, int> cuda_device_ids() {
  std::map<std::string, int> ids;
  // Never closed: unloading the driver while CUDA state may exist in the process is unsafe, and
  // the loaded library costs nothing afterwards.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    CCL_INFO(kTopo, "topology: no CUDA driver (libcuda.so.1): GPUs get no CUDA device ids");
    return ids;
  }
  auto init = symbol<CuInit>(lib, "cuInit");
  auto get_count = symbol<CuDeviceGetCount>(lib, "cuDeviceGetCount");
  auto get_device = symbol<CuDeviceGet>(lib, "cuDeviceGet");
  auto get_bus_id = symbol<CuDeviceGetPciBusId>(lib, "cuDeviceGetPCIBusId");
  if (init == nullptr || get_count == nullptr || get_device == nullptr || get_bus_id == nullptr) {
    CCL_INFO(kTopo, "topology: libcuda.so.1 lacks the device query functions");
    return ids;
  }
  int count = 0;
  if (int rc = init(0); rc != 0) {
    CCL_INFO(kTopo, "topology: cuInit failed (CUresult %d): no CUDA device ids", rc);
    return ids;
  }
  if (get_count(&count) != 0) return ids;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    int device = 0;
    char bus_id[64] = "";
    if (get_device(&device, ordinal) != 0) continue;
    if (get_bus_id(bus_id, sizeof(bus_id), device) != 0) continue;
    std::string canonical = canonical_pci_bus_id(bus_id);
    if (!canonical.empty()) ids.emplace(canonical, ordinal);
  }
  return ids;
}

}  // namespace ccl::topo
