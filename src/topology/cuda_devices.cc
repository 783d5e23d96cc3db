#include "topology/cuda_devices.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>
#include <vector>

#include "base/log.h"
#include "cuda/cuda_devices.h"
#include "cuda/cuda_driver.h"

namespace ccl::topo {

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
  const std::vector<std::string> bus_ids = cuda::device_pci_bus_ids();
  if (bus_ids.empty()) {
    CCL_INFO(kTopo, "topology: GPUs get no CUDA device ids (%s)",
             cuda::cuda_unavailable_reason().c_str());
  }
  for (size_t ordinal = 0; ordinal < bus_ids.size(); ++ordinal) {
    std::string canonical = canonical_pci_bus_id(bus_ids[ordinal]);
    if (!canonical.empty()) ids.emplace(std::move(canonical), static_cast<int>(ordinal));
  }
  return ids;
}

int name_gpus_by_cuda_id(Topology& topo) {
  const auto gpus = topo.of_type(NodeType::Gpu);
  if (gpus.empty()) return 0;
  const auto ids = cuda_device_ids();
  int named = 0;
  for (int gpu : gpus) {
    auto it = ids.find(canonical_pci_bus_id(topo.node(gpu).bus_id));
    topo.node(gpu).os_index = it == ids.end() ? -1 : it->second;
    if (it != ids.end()) ++named;
  }
  return named;
}

}  // namespace ccl::topo
