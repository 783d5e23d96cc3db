#include "bind.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/int_ranges.h"

#ifdef CCL_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace ccl::cclrun {

namespace {

constexpr int kBitsPerWord = static_cast<int>(8 * sizeof(unsigned long));
// sched_getaffinity's mask grows until the kernel accepts it; 64 Ki CPUs is far beyond any
// machine and bounds the loop.
constexpr size_t kMaxMaskWords = 65536 / kBitsPerWord;

#ifdef CCL_HAVE_HWLOC
CpuList cpus_of(hwloc_const_bitmap_t set) {
  CpuList cpus;
  // A bitmap may be infinite (all CPUs from some index on: weight -1); a machine's cores and
  // NUMA nodes never are, and walking one would not end.
  if (hwloc_bitmap_weight(set) <= 0) return cpus;
  for (int id = hwloc_bitmap_first(set); id >= 0; id = hwloc_bitmap_next(set, id)) {
    cpus.push_back(id);
  }
  return cpus;
}
#endif

}  // namespace

bool parse_bind_policy(const std::string& text, BindPolicy* out) {
  if (text == "none") {
    *out = BindPolicy::kNone;
  } else if (text == "core") {
    *out = BindPolicy::kCore;
  } else if (text == "numa") {
    *out = BindPolicy::kNuma;
  } else {
    return false;
  }
  return true;
}

const char* bind_policy_name(BindPolicy policy) {
  switch (policy) {
    case BindPolicy::kCore:
      return "core";
    case BindPolicy::kNuma:
      return "numa";
    case BindPolicy::kNone:
      break;
  }
  return "none";
}

std::string format_cpu_list(const CpuList& cpus) { return ccl::format_int_ranges(cpus); }

std::vector<BindUnit> assign_units(const std::vector<BindUnit>& units, const CpuList& allowed,
                                   int nranks) {
  std::vector<BindUnit> usable;
  for (const BindUnit& unit : units) {
    BindUnit cut{unit.index, {}};
    for (int cpu : unit.cpus) {
      if (std::find(allowed.begin(), allowed.end(), cpu) != allowed.end()) cut.cpus.push_back(cpu);
    }
    if (!cut.cpus.empty()) usable.push_back(std::move(cut));
  }
  std::vector<BindUnit> plan;
  if (usable.empty() || nranks <= 0) return plan;
  plan.reserve(static_cast<size_t>(nranks));
  for (int rank = 0; rank < nranks; ++rank) plan.push_back(usable[rank % usable.size()]);
  return plan;
}

bool discover_units(BindPolicy policy, std::vector<BindUnit>* units, std::string* error) {
  units->clear();
#ifdef CCL_HAVE_HWLOC
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) {
    *error = std::string("hwloc_topology_init: ") + strerror(errno);
    return false;
  }
  if (hwloc_topology_load(topology) != 0) {
    *error = std::string("hwloc_topology_load: ") + strerror(errno);
    hwloc_topology_destroy(topology);
    return false;
  }
  hwloc_obj_type_t type = policy == BindPolicy::kNuma ? HWLOC_OBJ_NUMANODE : HWLOC_OBJ_CORE;
  // A few platforms report no cores, only hardware threads: bind to those then.
  if (type == HWLOC_OBJ_CORE && hwloc_get_nbobjs_by_type(topology, type) <= 0) {
    type = HWLOC_OBJ_PU;
  }
  const int count = hwloc_get_nbobjs_by_type(topology, type);
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topology, type, static_cast<unsigned>(i));
    if (obj == nullptr || obj->cpuset == nullptr) continue;
    // A NUMA node without CPUs (memory only, e.g. HBM or CXL) has nothing to bind a rank to.
    CpuList cpus = cpus_of(obj->cpuset);
    if (!cpus.empty()) units->push_back(BindUnit{static_cast<int>(obj->logical_index), cpus});
  }
  hwloc_topology_destroy(topology);
  if (units->empty()) {
    *error = std::string("hwloc found no ") + (policy == BindPolicy::kNuma ? "NUMA node" : "core") +
             " with CPUs";
    return false;
  }
  return true;
#else
  *error = std::string("--bind ") + bind_policy_name(policy) +
           " needs hwloc, and this cclrun was built without it (install hwloc's development "
           "package and rebuild, or use --bind none)";
  return false;
#endif
}

CpuList current_affinity() {
  CpuList cpus;
  for (size_t words = 16; words <= kMaxMaskWords; words *= 2) {
    AffinityMask mask(words, 0);
    if (sched_getaffinity(0, words * sizeof(unsigned long),
                          reinterpret_cast<cpu_set_t*>(mask.data())) != 0) {
      if (errno == EINVAL) continue;  // the kernel's mask is larger than ours
      return cpus;
    }
    for (size_t w = 0; w < words; ++w) {
      for (int b = 0; b < kBitsPerWord; ++b) {
        if ((mask[w] >> b) & 1UL) cpus.push_back(static_cast<int>(w) * kBitsPerWord + b);
      }
    }
    return cpus;
  }
  return cpus;
}

AffinityMask make_affinity_mask(const CpuList& cpus) {
  AffinityMask mask;
  for (int cpu : cpus) {
    if (cpu < 0) continue;
    size_t word = static_cast<size_t>(cpu / kBitsPerWord);
    if (mask.size() <= word) mask.resize(word + 1, 0);
    mask[word] |= 1UL << (cpu % kBitsPerWord);
  }
  return mask;
}

int apply_affinity(const AffinityMask& mask) {
  if (mask.empty()) return 0;
  return sched_setaffinity(0, mask.size() * sizeof(unsigned long),
                           reinterpret_cast<const cpu_set_t*>(mask.data()));
}

bool plan_bindings(BindPolicy policy, int nranks, std::vector<BindUnit>* plan, std::string* error) {
  plan->clear();
  if (policy == BindPolicy::kNone) return true;
  std::vector<BindUnit> units;
  if (!discover_units(policy, &units, error)) return false;
  CpuList allowed = current_affinity();
  if (allowed.empty()) {
    *error = std::string("sched_getaffinity: ") + strerror(errno);
    return false;
  }
  *plan = assign_units(units, allowed, nranks);
  if (plan->empty()) {
    *error = std::string("no ") + (policy == BindPolicy::kNuma ? "NUMA node" : "core") +
             " has a CPU that cclrun may use (its affinity is " + format_cpu_list(allowed) + ")";
    return false;
  }
  return true;
}

}  // namespace ccl::cclrun
