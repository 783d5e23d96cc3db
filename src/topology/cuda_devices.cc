#include "topology/cuda_devices.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/log.h"

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

namespace {

// Reads 1..max_digits hex digits of `text` from `at`, up to `stop` (or the end when stop is 0);
// false if there are none, too many, or something else.
bool hex_field(const std::string& text, size_t* at, size_t max_digits, char stop,
               unsigned long* out) {
  const size_t begin = *at;
  size_t end = begin;
  while (end < text.size() && std::isxdigit(static_cast<unsigned char>(text[end]))) ++end;
  const size_t digits = end - begin;
  if (digits == 0 || digits > max_digits) return false;
  if (stop != 0 ? (end >= text.size() || text[end] != stop) : end != text.size()) return false;
  *out = std::stoul(text.substr(begin, digits), nullptr, 16);
  *at = end + (stop != 0 ? 1 : 0);
  return true;
}

}  // namespace

std::string canonical_pci_bus_id(const std::string& text) {
  // [domain:]bus:device.function, in hex; sscanf would let "0x" prefixes and trailing text by.
  // (A hand parser: std::regex trips GCC 12's -Wmaybe-uninitialized under the sanitizers.)
  const bool has_domain = std::count(text.begin(), text.end(), ':') == 2;
  size_t at = 0;
  unsigned long domain = 0, bus = 0, dev = 0, fn = 0;
  if (has_domain && !hex_field(text, &at, 8, ':', &domain)) return "";
  if (!hex_field(text, &at, 2, ':', &bus) || !hex_field(text, &at, 2, '.', &dev) ||
      !hex_field(text, &at, 1, 0, &fn)) {
    return "";
  }
  if (dev > 0x1f || fn > 7) return "";
  char out[32];
  std::snprintf(out, sizeof(out), "%04lx:%02lx:%02lx.%lu", domain, bus, dev, fn);
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
