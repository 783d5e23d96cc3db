// cclrun --bind: the option parsing, the pure assignment of cores / NUMA nodes to local ranks,
// the CPU list text and masks, and (with hwloc) that what hwloc finds is consistent with the
// CPUs this process may use.
#include "bind.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <set>
#include <string>
#include <vector>

#include "options.h"

namespace ccl::cclrun {
namespace {

bool parse(std::vector<std::string> args, Options* options, std::string* error) {
  args.insert(args.begin(), "cclrun");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parse_options(static_cast<int>(args.size()), argv.data(), options, error);
}

TEST(BindOptions, DefaultIsNone) {
  Options o;
  std::string error;
  ASSERT_TRUE(parse({"-np", "2", "true"}, &o, &error)) << error;
  EXPECT_EQ(o.bind, BindPolicy::kNone);
  EXPECT_FALSE(o.report_bindings);
}

TEST(BindOptions, Policies) {
  const std::vector<std::pair<std::vector<std::string>, BindPolicy>> cases = {
      {{"--bind", "core"}, BindPolicy::kCore},
      {{"--bind=numa"}, BindPolicy::kNuma},
      {{"--bind-to", "numa"}, BindPolicy::kNuma},
      {{"--bind", "core", "--bind", "none"}, BindPolicy::kNone},  // the last one wins
  };
  for (const auto& [flags, want] : cases) {
    Options o;
    std::string error;
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"-np", "2", "--report-bindings", "true"});
    ASSERT_TRUE(parse(args, &o, &error)) << flags[0] << ": " << error;
    EXPECT_EQ(o.bind, want) << flags[0];
    EXPECT_TRUE(o.report_bindings);
    EXPECT_EQ(o.command, std::vector<std::string>{"true"});
  }
}

TEST(BindOptions, BadValues) {
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--bind", "socket"}, {"--bind=Core"}, {"--bind="}, {"--report-bindings=yes"}}) {
    Options o;
    std::string error;
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"-np", "2", "true"});
    EXPECT_FALSE(parse(args, &o, &error)) << flags[0];
    EXPECT_FALSE(error.empty());
  }
  Options o;
  std::string error;
  EXPECT_FALSE(parse({"-np", "2", "--bind"}, &o, &error));
  EXPECT_NE(error.find("needs a value"), std::string::npos) << error;
}

TEST(BindOptions, UsageMentionsBind) {
  const std::string usage = usage_text();
  EXPECT_NE(usage.find("--bind core|numa|none"), std::string::npos);
  EXPECT_NE(usage.find("--report-bindings"), std::string::npos);
}

TEST(BindPolicyNames, RoundTrip) {
  for (BindPolicy p : {BindPolicy::kNone, BindPolicy::kCore, BindPolicy::kNuma}) {
    BindPolicy back = BindPolicy::kNone;
    ASSERT_TRUE(parse_bind_policy(bind_policy_name(p), &back));
    EXPECT_EQ(back, p);
  }
}

TEST(CpuList, Format) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({3}), "3");
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(format_cpu_list({0, 2, 3, 4, 8, 10, 11}), "0,2-4,8,10-11");
}

TEST(CpuList, Mask) {
  EXPECT_TRUE(make_affinity_mask({}).empty());
  AffinityMask m = make_affinity_mask({0, 3, 64, 130});
  ASSERT_EQ(m.size() * 8 * sizeof(unsigned long) > 130, true);
  const auto* set = reinterpret_cast<const cpu_set_t*>(m.data());
  const size_t bytes = m.size() * sizeof(unsigned long);
  EXPECT_TRUE(CPU_ISSET_S(0, bytes, set));
  EXPECT_TRUE(CPU_ISSET_S(3, bytes, set));
  EXPECT_TRUE(CPU_ISSET_S(64, bytes, set));
  EXPECT_TRUE(CPU_ISSET_S(130, bytes, set));
  EXPECT_FALSE(CPU_ISSET_S(1, bytes, set));
  EXPECT_FALSE(CPU_ISSET_S(129, bytes, set));
  EXPECT_EQ(CPU_COUNT_S(bytes, set), 4);
}

// Two cores with two hardware threads each, the second core's threads numbered like Linux
// numbers SMT siblings (0,2 and 1,3).
std::vector<BindUnit> smt_cores() { return {{0, {0, 2}}, {1, {1, 3}}}; }

TEST(AssignUnits, RoundRobinOverCores) {
  auto plan = assign_units(smt_cores(), {0, 1, 2, 3}, 5);
  ASSERT_EQ(plan.size(), 5u);
  for (int rank = 0; rank < 5; ++rank) {
    EXPECT_EQ(plan[rank].index, rank % 2) << rank;
    EXPECT_EQ(plan[rank].cpus, (rank % 2 == 0 ? CpuList{0, 2} : CpuList{1, 3})) << rank;
  }
}

TEST(AssignUnits, OnlyAllowedCpus) {
  // Under `taskset -c 1-3`: core 0 keeps one thread, core 1 both.
  auto plan = assign_units(smt_cores(), {1, 2, 3}, 2);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].cpus, (CpuList{2}));
  EXPECT_EQ(plan[1].cpus, (CpuList{1, 3}));
  // Under `taskset -c 1,3`: core 0 is gone, both ranks share core 1.
  plan = assign_units(smt_cores(), {1, 3}, 2);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].index, 1);
  EXPECT_EQ(plan[1].index, 1);
  EXPECT_EQ(plan[0].cpus, (CpuList{1, 3}));
}

TEST(AssignUnits, NumaNodes) {
  std::vector<BindUnit> numa = {{0, {0, 1, 2, 3}}, {1, {4, 5, 6, 7}}, {2, {}}};
  auto plan = assign_units(numa, {0, 1, 2, 3, 4, 5, 6, 7}, 3);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].index, 0);
  EXPECT_EQ(plan[1].index, 1);  // the CPU-less node 2 is skipped
  EXPECT_EQ(plan[2].index, 0);
  EXPECT_EQ(plan[1].cpus, (CpuList{4, 5, 6, 7}));
}

TEST(AssignUnits, NothingLeft) {
  EXPECT_TRUE(assign_units(smt_cores(), {7}, 2).empty());
  EXPECT_TRUE(assign_units({}, {0, 1}, 2).empty());
  EXPECT_TRUE(assign_units(smt_cores(), {0, 1}, 0).empty());
}

TEST(PlanBindings, NoneBindsNothing) {
  std::vector<BindUnit> plan = {{9, {9}}};
  std::string error;
  ASSERT_TRUE(plan_bindings(BindPolicy::kNone, 4, &plan, &error)) << error;
  EXPECT_TRUE(plan.empty());
}

TEST(CurrentAffinity, MatchesSchedGetaffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  CpuList cpus = current_affinity();
  EXPECT_EQ(static_cast<int>(cpus.size()), CPU_COUNT(&set));
  for (int cpu : cpus) EXPECT_TRUE(CPU_ISSET(cpu, &set)) << cpu;
}

#ifdef CCL_HAVE_HWLOC
// What hwloc reports: cores and NUMA nodes that are disjoint and together cover every CPU this
// process may use.
void check_partition(BindPolicy policy) {
  std::vector<BindUnit> units;
  std::string error;
  ASSERT_TRUE(discover_units(policy, &units, &error)) << error;
  ASSERT_FALSE(units.empty());
  std::set<int> seen;
  for (const BindUnit& u : units) {
    EXPECT_FALSE(u.cpus.empty());
    for (int cpu : u.cpus) EXPECT_TRUE(seen.insert(cpu).second) << "cpu " << cpu << " twice";
  }
  CpuList allowed = current_affinity();
  for (int cpu : allowed) EXPECT_EQ(seen.count(cpu), 1u) << "cpu " << cpu << " not in any unit";

  std::vector<BindUnit> plan;
  const int nranks = static_cast<int>(units.size()) + 1;  // wraps around once
  ASSERT_TRUE(plan_bindings(policy, nranks, &plan, &error)) << error;
  ASSERT_EQ(plan.size(), static_cast<size_t>(nranks));
  EXPECT_EQ(plan[0].cpus, plan.back().cpus);
}

TEST(DiscoverUnits, Cores) { check_partition(BindPolicy::kCore); }
TEST(DiscoverUnits, NumaNodes) { check_partition(BindPolicy::kNuma); }
#else
TEST(DiscoverUnits, ClearErrorWithoutHwloc) {
  std::vector<BindUnit> plan;
  std::string error;
  EXPECT_FALSE(plan_bindings(BindPolicy::kCore, 2, &plan, &error));
  EXPECT_NE(error.find("hwloc"), std::string::npos) << error;
}
#endif

}  // namespace
}  // namespace ccl::cclrun
