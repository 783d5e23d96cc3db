// cclrun --bind core|numa|none: pinning each local rank to CPUs, like mpirun's --bind-to.
// The CPU sets are computed with hwloc in cclrun before any fork (plan_bindings); a child only
// calls sched_setaffinity on a mask built beforehand (apply_affinity), which is
// async-signal-safe, never hwloc.
#pragma once

#include <string>
#include <vector>

namespace ccl::cclrun {

enum class BindPolicy { kNone, kCore, kNuma };

// "none", "core", "numa"; false for anything else.
bool parse_bind_policy(const std::string& text, BindPolicy* out);
const char* bind_policy_name(BindPolicy policy);

// Logical CPU numbers (as sched_setaffinity and /proc/self/status count them), ascending.
using CpuList = std::vector<int>;

// "0-3,8,10-11", as in /proc/self/status's Cpus_allowed_list; "" for an empty list.
std::string format_cpu_list(const CpuList& cpus);

// One place a rank can be bound to: a core (all of its hardware threads) or a NUMA node.
struct BindUnit {
  int index = 0;  // hwloc's logical index of the core or NUMA node
  CpuList cpus;
};

// The pure part of the plan: each unit is cut down to the CPUs cclrun may use (`allowed`, its
// own affinity, e.g. under taskset); units left empty are dropped; local rank i then gets unit
// i mod (units left). Empty when no unit is left (the caller reports that).
std::vector<BindUnit> assign_units(const std::vector<BindUnit>& units, const CpuList& allowed,
                                   int nranks);

// The cores or NUMA nodes of this machine in hwloc's logical order (false with *error if hwloc
// fails, or if cclrun was built without hwloc).
bool discover_units(BindPolicy policy, std::vector<BindUnit>* units, std::string* error);

// cclrun's own affinity (sched_getaffinity).
CpuList current_affinity();

// A sched_setaffinity mask, built before fork; empty means "leave the affinity alone".
using AffinityMask = std::vector<unsigned long>;
AffinityMask make_affinity_mask(const CpuList& cpus);
// In the forked child: 0, or -1 with errno set. Only a system call.
int apply_affinity(const AffinityMask& mask);

// Each local rank's binding for `policy` (an empty vector for kNone); false with *error when the
// machine cannot be asked or nothing is left to bind to.
bool plan_bindings(BindPolicy policy, int nranks, std::vector<BindUnit>* plan, std::string* error);

}  // namespace ccl::cclrun
