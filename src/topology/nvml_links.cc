#include "topology/nvml_links.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "base/log.h"
#include "topology/cuda_devices.h"

namespace ccl::topo {

namespace {

// The NVML declarations used, written from NVML's API reference so that no NVML header is needed
// (none is installed here); nvmlReturn_t is an int, 0 being NVML_SUCCESS.
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlPciInfo {       // nvmlPciInfo_t
  char bus_id_legacy[16];  // "dddd:bb:dd.f"
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];  // "dddddddd:bb:dd.f"
};
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlGetHandleByPciBusId = int (*)(const char* bus_id, NvmlDevice* device);
using NvmlGetNvLinkState = int (*)(NvmlDevice device, unsigned link, int* is_active);
using NvmlGetNvLinkRemotePciInfo = int (*)(NvmlDevice device, unsigned link, NvmlPciInfo* pci);
using NvmlGetNvLinkVersion = int (*)(NvmlDevice device, unsigned link, unsigned* version);
using NvmlGetNvLinkRemoteDeviceType = int (*)(NvmlDevice device, unsigned link, int* type);

constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kRemoteIbmNpu = 1;    // NVML_NVLINK_DEVICE_TYPE_IBMNPU: a POWER9 CPU, no switch

template <typename F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

double nvlink_lane_gbps(unsigned nvml_version) {
  // NVML reports nvmlNvlinkVersion_t, not the marketing number: 1 = 1.0, 2 = 2.0, 3 = 2.2,
  // 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0 (an A100 says 5). The raw rate of one link in one
  // direction, from NVIDIA's datasheets (total NVLink bandwidth / links / 2 directions): P100
  // 160 GB/s over 4 links = 20; V100 300/6 and A100 600/12 and H100 900/18 = 25; B200 1800/18 =
  // 50. Protocol overhead leaves about 80% of that to data, which is what collectives see, so
  // the figures are 0.8 x raw: 16, 20, 20, 20, 20, 20, 40.
  switch (nvml_version) {
    case 1:
      return 16.0;
    case 7:
      return 40.0;
    default:
      return 20.0;  // 2.0 to 4.0, and unknown values: the common case
  }
}

int add_nvlink_lanes(Topology& topo, const std::vector<NvLinkLane>& lanes) {
  std::map<std::string, int> gpu_by_bus;
  std::map<std::string, int> switch_by_bus;
  for (const Node& n : topo.nodes()) {
    std::string bus = canonical_pci_bus_id(n.bus_id);
    if (bus.empty()) continue;
    if (n.type == NodeType::Gpu) gpu_by_bus.emplace(bus, n.id);
    if (n.type == NodeType::NvSwitch) switch_by_bus.emplace(bus, n.id);
  }
  int switches = static_cast<int>(topo.of_type(NodeType::NvSwitch).size());
  struct Side {
    int count = 0;
    double gbps = 0;
  };
  // Ordered maps: the links come out in the same order on every run.
  std::map<std::pair<int, int>, std::pair<Side, Side>> gpu_pairs;  // (low id, high id)
  std::map<std::pair<int, int>, Side> gpu_switch;                  // (gpu, switch)
  for (const NvLinkLane& lane : lanes) {
    std::string remote = canonical_pci_bus_id(lane.remote_bus_id);
    if (remote.empty() || lane.gpu < 0 || lane.gpu >= static_cast<int>(topo.nodes().size())) {
      continue;
    }
    const double gbps = nvlink_lane_gbps(lane.version);
    auto gpu = gpu_by_bus.find(remote);
    if (gpu != gpu_by_bus.end()) {
      if (gpu->second == lane.gpu) continue;  // a loopback lane says nothing about the graph
      auto key = std::minmax(lane.gpu, gpu->second);
      auto& sides = gpu_pairs[key];
      Side& side = lane.gpu == key.first ? sides.first : sides.second;
      side.count += 1;
      side.gbps += gbps;
      continue;
    }
    auto sw = switch_by_bus.find(remote);
    if (sw == switch_by_bus.end()) {
      int id =
          topo.add_node(NodeType::NvSwitch, topo.root(), "nvswitch" + std::to_string(switches++));
      topo.node(id).bus_id = remote;
      sw = switch_by_bus.emplace(remote, id).first;
    }
    Side& side = gpu_switch[{lane.gpu, sw->second}];
    side.count += 1;
    side.gbps += gbps;
  }
  int added = 0;
  for (const auto& [key, sides] : gpu_pairs) {
    const Side& side = sides.first.count >= sides.second.count ? sides.first : sides.second;
    topo.add_link(Link{key.first, key.second, LinkType::NvLink, side.count, side.gbps});
    ++added;
  }
  for (const auto& [key, side] : gpu_switch) {
    topo.add_link(Link{key.first, key.second, LinkType::NvLink, side.count, side.gbps});
    ++added;
  }
  return added;
}

int discover_nvlinks(Topology& topo) {
  const std::vector<int> gpus = topo.of_type(NodeType::Gpu);
  if (gpus.empty()) {
    CCL_INFO(kTopo, "topology: no GPUs, no NVLink to look for");
    return 0;
  }
  // Never closed, like libcuda: other code of the process may use NVML too.
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    CCL_INFO(kTopo, "topology: no NVML (libnvidia-ml.so.1), so no NVLink information");
    return 0;
  }
  auto init = symbol<NvmlInit>(lib, "nvmlInit_v2");
  auto shutdown = symbol<NvmlShutdown>(lib, "nvmlShutdown");
  auto by_bus = symbol<NvmlGetHandleByPciBusId>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  auto state = symbol<NvmlGetNvLinkState>(lib, "nvmlDeviceGetNvLinkState");
  auto remote_pci = symbol<NvmlGetNvLinkRemotePciInfo>(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  // Optional: older drivers may lack them.
  auto version = symbol<NvmlGetNvLinkVersion>(lib, "nvmlDeviceGetNvLinkVersion");
  auto remote_type =
      symbol<NvmlGetNvLinkRemoteDeviceType>(lib, "nvmlDeviceGetNvLinkRemoteDeviceType");
  if (!init || !shutdown || !by_bus || !state || !remote_pci) {
    CCL_INFO(kTopo, "topology: NVML lacks the NVLink query functions");
    return 0;
  }
  if (int rc = init(); rc != 0) {
    CCL_INFO(kTopo, "topology: nvmlInit failed (nvmlReturn_t %d): no NVLink information", rc);
    return 0;
  }
  std::vector<NvLinkLane> lanes;
  for (int gpu : gpus) {
    NvmlDevice device = nullptr;
    if (by_bus(topo.node(gpu).bus_id.c_str(), &device) != 0) {
      CCL_INFO(kTopo, "topology: NVML does not know GPU %s", topo.node(gpu).bus_id.c_str());
      continue;
    }
    for (unsigned link = 0; link < kMaxLinks; ++link) {
      int active = 0;
      if (state(device, link, &active) != 0 || active == 0) continue;
      int type = 0;
      if (remote_type && remote_type(device, link, &type) == 0 && type == kRemoteIbmNpu) continue;
      NvmlPciInfo pci{};
      if (remote_pci(device, link, &pci) != 0) continue;
      pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
      std::string remote = canonical_pci_bus_id(pci.bus_id);
      if (remote.empty()) {
        char text[32];
        std::snprintf(text, sizeof(text), "%x:%x:%x.0", pci.domain, pci.bus, pci.device);
        remote = text;
      }
      unsigned v = 0;
      if (version && version(device, link, &v) != 0) v = 0;
      lanes.push_back(NvLinkLane{gpu, remote, v});
    }
  }
  shutdown();
  const int added = add_nvlink_lanes(topo, lanes);
  CCL_INFO(kTopo, "topology: NVML: %zu active NVLink lanes on %zu GPUs, %d links", lanes.size(),
           gpus.size(), added);
  return added;
}

}  // namespace ccl::topo
