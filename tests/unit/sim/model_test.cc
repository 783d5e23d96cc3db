// ccl-sim's link model (tools/ccl-sim/model.h): what the tuner's figures carry over, model files
// (good ones, comments, unknown keys, bad values, a tuner figures file), and the figures a real
// run would use: the tuner cache entry a real communicator writes, else the defaults.
#include "model.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/scoped_env.h"
#include "../support/temp_file.h"
#include "base/config.h"
#include "base/error.h"
#include "ccl/ccl.h"
#include "cluster.h"
#include "core/comm/comm.h"
#include "core/tuning/figures_cache.h"
#include "core/tuning/tuner.h"

namespace ccl::sim {
namespace {

using ccl::test::ScopedEnv;
using ccl::test::TempDir;

bool same(const tune::LinkFigures& a, const tune::LinkFigures& b) {
  return a.alpha_us == b.alpha_us && a.beta_gbps == b.beta_gbps;
}

bool same(const SimModel& a, const SimModel& b) {
  return same(a.shm, b.shm) && same(a.nvlink, b.nvlink) && same(a.net, b.net) &&
         a.fabric_gbps == b.fabric_gbps && same(a.direct, b.direct) &&
         a.reduce_gbps == b.reduce_gbps && a.copy_gbps == b.copy_gbps &&
         a.call_overhead_us == b.call_overhead_us && a.direct_overhead_us == b.direct_overhead_us &&
         a.cache_bytes == b.cache_bytes && a.memory_factor == b.memory_factor &&
         a.sender_share == b.sender_share;
}

bool same(const tune::Figures& a, const tune::Figures& b) {
  return same(a.shm, b.shm) && same(a.net, b.net) && same(a.direct, b.direct) &&
         a.reduce_gbps == b.reduce_gbps;
}

// The message of the ccl::Error `body` throws, which must be InvalidArgument ("" if none).
template <typename Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(SimModel, FromFigures) {
  tune::Figures f;
  f.shm = {0.5, 13.5};
  f.net = {20, 11};
  f.direct = {0.25, 19.5};
  f.reduce_gbps = 7;
  const SimModel m = from_figures(f);
  EXPECT_TRUE(same(m.shm, f.shm));
  EXPECT_TRUE(same(m.net, f.net));
  EXPECT_TRUE(same(m.direct, f.direct));
  EXPECT_EQ(m.reduce_gbps, 7);
  EXPECT_EQ(m.fabric_gbps, 11);     // an uplink per NIC at the NIC's rate
  EXPECT_EQ(m.copy_gbps, 19.5);     // the direct path's copy bandwidth
  EXPECT_EQ(m.nvlink.alpha_us, 2);  // H100 NVLink defaults (model.cc)
  EXPECT_EQ(m.nvlink.beta_gbps, 360);
  EXPECT_EQ(m.call_overhead_us, 1);
  EXPECT_EQ(m.direct_overhead_us, 0.5);
  EXPECT_EQ(m.cache_bytes, 2 << 20);  // this VM's L2 per core
  EXPECT_EQ(m.memory_factor, 0.52);   // memcpy at 64 MiB against 1 MiB
  EXPECT_EQ(m.sender_share, 0.5);     // a loopback alpha: two CPUs' work
  EXPECT_NO_THROW(check_model(m, "test"));
  EXPECT_NO_THROW(check_model(from_figures(tune::default_figures()), "test"));
}

TEST(SimModel, CheckModelNamesTheField) {
  SimModel m = from_figures(tune::default_figures());
  m.fabric_gbps = 0;
  EXPECT_NE(error_of([&] { check_model(m, "where"); }).find("where: fabric.gbps"),
            std::string::npos);
  m = from_figures(tune::default_figures());
  m.call_overhead_us = -1;
  EXPECT_NE(error_of([&] { check_model(m, "where"); }).find("call_overhead_us"), std::string::npos);
  for (const double bad : {0.0, 1.5}) {
    m = from_figures(tune::default_figures());
    m.memory_factor = bad;
    EXPECT_NE(error_of([&] { check_model(m, "where"); }).find("memory_factor must be in (0, 1]"),
              std::string::npos);
  }
}

TEST(SimModel, MemoryScaleMixesCacheAndMemoryRates) {
  SimModel m;
  m.cache_bytes = 1 << 20;
  m.memory_factor = 0.5;
  EXPECT_EQ(memory_scale(m, 0), 1);
  EXPECT_EQ(memory_scale(m, 1 << 20), 1);  // fits
  // 4 MiB: a quarter at the cache's rate, the rest at half of it: 1 / (0.25 + 0.75 / 0.5).
  EXPECT_DOUBLE_EQ(memory_scale(m, 4 << 20), 1 / 1.75);
  EXPECT_NEAR(memory_scale(m, 1e15), 0.5, 1e-6);  // nothing fits
  m.memory_factor = 1;
  EXPECT_EQ(memory_scale(m, 1e12), 1);
}

TEST(SimModel, ModelFileOverridesItsKeys) {
  const TempDir dir("ccl_sim_model");
  const SimModel base = from_figures(tune::default_figures());
  const std::string file = dir.write("model.txt",
                                     "# an H100 cluster\n"
                                     "\n"
                                     "nvlink.beta_gbps 370   # measured ring busbw\n"
                                     "  net.alpha_us\t4.5\n"
                                     "net.beta_gbps 46\n"
                                     "fabric.gbps 50\n"
                                     "copy_gbps 1e3\n"
                                     "call_overhead_us 0\n"
                                     "memory_factor 0.25\n");
  const SimModel m = read_model_file(file, base);
  SimModel expected = base;
  expected.nvlink.beta_gbps = 370;
  expected.net = {4.5, 46};
  expected.fabric_gbps = 50;
  expected.copy_gbps = 1000;
  expected.call_overhead_us = 0;
  expected.memory_factor = 0.25;
  EXPECT_TRUE(same(m, expected));
  // An empty file (or only comments) is the base.
  EXPECT_TRUE(same(read_model_file(dir.write("empty.txt", "# nothing\n"), base), base));
}

TEST(SimModel, FormatReadsBackExactly) {
  const TempDir dir("ccl_sim_model");
  SimModel m = from_figures(tune::default_figures());
  m.shm.alpha_us = 0.123456789;
  m.nvlink.beta_gbps = 1.0 / 3;
  m.call_overhead_us = 0;
  const std::string text = format_model(m);
  EXPECT_NE(text.find("\nnvlink.alpha_us 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nfabric.gbps 3\n"), std::string::npos) << text;
  const SimModel back = read_model_file(dir.write("m.txt", text), SimModel{});
  EXPECT_TRUE(same(back, m));
}

TEST(SimModel, TunerFiguresFileIsAModelFile) {
  const TempDir dir("ccl_sim_model");
  tune::Figures f = tune::default_figures();
  f.net = {7, 9};
  const SimModel base = from_figures(tune::default_figures());
  const SimModel m = read_model_file(dir.write("figures.txt", tune::format_figures(f)), base);
  EXPECT_TRUE(same(m.net, f.net));
  EXPECT_TRUE(same(m.nvlink, base.nvlink));
  EXPECT_EQ(m.fabric_gbps, base.fabric_gbps);  // a file sets what it names, nothing else
}

TEST(SimModel, BadFilesNameFileLineAndKey) {
  const TempDir dir("ccl_sim_model");
  const SimModel base = from_figures(tune::default_figures());
  struct Case {
    const char* text;
    const char* line_and_key;
    const char* why;
  };
  const Case cases[] = {
      {"shm.alpha_us 1\n# ok\npcie.beta_gbps 3\n", ":3: key 'pcie.beta_gbps'", "unknown key"},
      {"net.beta_gbps fast\n", ":1: key 'net.beta_gbps'", "not a number"},
      {"net.beta_gbps 3x\n", ":1: key 'net.beta_gbps'", "not a number"},
      {"net.beta_gbps 0\n", ":1: key 'net.beta_gbps'", "must be > 0"},
      {"\nnvlink.alpha_us -1\n", ":2: key 'nvlink.alpha_us'", "must be >= 0"},
      {"fabric.gbps inf\n", ":1: key 'fabric.gbps'", "not a finite number"},
      {"reduce_gbps\n", ":1: key 'reduce_gbps'", "missing value"},
      {"copy_gbps 1 2\n", ":1: key 'copy_gbps'", "more than one value"},
      {"copy_gbps 1\ncopy_gbps 2\n", ":2: key 'copy_gbps'", "repeated key"},
  };
  for (const Case& c : cases) {
    const std::string file = dir.write("bad.txt", c.text);
    const std::string message = error_of([&] { read_model_file(file, base); });
    EXPECT_NE(message.find(file + c.line_and_key), std::string::npos) << message;
    EXPECT_NE(message.find(c.why), std::string::npos) << message;
  }
  const std::string missing = dir.path() + "/none.txt";
  EXPECT_NE(error_of([&] { read_model_file(missing, base); }).find(missing + ": cannot open"),
            std::string::npos);
}

tune::Shape one_host(int n) {
  ClusterSpec s;
  s.per_node = n;
  return Cluster(s, from_figures(tune::default_figures())).shape(1 << 20, 1 << 20);
}

TEST(SimFigures, TransportsOfRankZero) {
  EXPECT_TRUE(transports_for(one_host(1)).empty());
  EXPECT_EQ(transports_for(one_host(4)), std::vector<std::string>{"shm"});
  tune::Shape s = one_host(4);
  s.shm = false;
  EXPECT_EQ(transports_for(s), std::vector<std::string>{"tcp"});
  s.nhosts = 2;
  s.ranks_per_host = 2;
  s.shm = true;
  EXPECT_EQ(transports_for(s), (std::vector<std::string>{"shm", "tcp"}));
  s.ranks_per_host = 1;
  s.nhosts = 4;
  EXPECT_EQ(transports_for(s, "ib"), std::vector<std::string>{"ib"});
}

TEST(SimFigures, DefaultsWithoutACacheEntry) {
  const TempDir dir("ccl_sim_model");
  std::string source;
  EXPECT_TRUE(
      same(figures_for(one_host(2), dir.path(), "somehost", &source), tune::default_figures()));
  EXPECT_NE(source.find("defaults"), std::string::npos) << source;
  EXPECT_TRUE(same(figures_for(one_host(2), "", "somehost"), tune::default_figures()));
  // CCL_TUNER_CACHE=none and no CCL_TUNER_FILE: the defaults too.
  const ScopedEnv file("CCL_TUNER_FILE", nullptr);
  const ScopedEnv none("CCL_TUNER_CACHE", "none");
  EXPECT_TRUE(same(figures_for(one_host(2)), tune::default_figures()));
}

TEST(SimFigures, CacheEntryOfTheShapeAndHost) {
  const TempDir dir("ccl_sim_model");
  const tune::Shape shape = one_host(2);
  tune::Figures f = tune::default_figures();
  f.shm = {0.53, 13.8};
  const std::string key = tune::figures_cache_key("somehost", shape, {"shm"});
  ASSERT_TRUE(tune::write_cached_figures(tune::figures_cache_path(dir.path(), key), key, f));
  std::string source;
  EXPECT_TRUE(same(figures_for(shape, dir.path(), "somehost", &source), f));
  EXPECT_NE(source.find(dir.path()), std::string::npos) << source;
  // Another host, another shape: not this entry.
  EXPECT_TRUE(same(figures_for(shape, dir.path(), "otherhost"), tune::default_figures()));
  EXPECT_TRUE(same(figures_for(one_host(3), dir.path(), "somehost"), tune::default_figures()));
  // CCL_TUNER_FILE wins, as at a real init.
  const std::string file = dir.path() + "/figures.txt";
  tune::Figures g = f;
  g.net = {1, 2};
  std::ofstream(file) << tune::format_figures(g);
  const ScopedEnv tuner_file("CCL_TUNER_FILE", file.c_str());
  EXPECT_TRUE(same(figures_for(shape, &source), g));
  EXPECT_NE(source.find("CCL_TUNER_FILE"), std::string::npos) << source;
}

// A real communicator of two ranks (threads) on this host writes its probed figures to the cache;
// the simulator's shape of the same job finds exactly them.
TEST(SimFigures, FindsWhatARealCommunicatorKept) {
  const TempDir dir("ccl_sim_model");
  const ScopedEnv cache("CCL_TUNER_CACHE", dir.path().c_str());
  const ScopedEnv file("CCL_TUNER_FILE", nullptr);
  constexpr int kRanks = 2;
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<tune::Figures> figures(kRanks);
  std::vector<tune::Shape> shapes(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      cclComm_t comm = nullptr;
      ASSERT_EQ(cclCommInitRank(&comm, kRanks, id, r), cclSuccess);
      figures[static_cast<size_t>(r)] = comm->impl->tuner().figures();
      shapes[static_cast<size_t>(r)] = comm->impl->tuner().shape();
      EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
    });
  }
  for (auto& t : ranks) t.join();

  // The shape as the simulator makes it, with ccl's default window and chunk.
  ClusterSpec s;
  s.per_node = kRanks;
  const Cluster cluster(s, from_figures(tune::default_figures()));
  int64_t chunk = config_int("CCL_CHUNKSIZE");
  if (chunk <= 0) chunk = config_int("CCL_BUFFSIZE") / 4;
  const tune::Shape shape =
      cluster.shape(static_cast<size_t>(config_int("CCL_SHM_WINDOW")), static_cast<size_t>(chunk));
  const tune::Shape& real = shapes[0];
  EXPECT_EQ(shape.nranks, real.nranks);
  EXPECT_EQ(shape.nhosts, real.nhosts);
  EXPECT_EQ(shape.ranks_per_host, real.ranks_per_host);
  EXPECT_EQ(shape.uniform_hosts, real.uniform_hosts);
  EXPECT_EQ(shape.shm, real.shm);
  EXPECT_EQ(shape.window_bytes, real.window_bytes);
  EXPECT_EQ(shape.chunk_bytes, real.chunk_bytes);

  std::string source;
  const tune::Figures found = figures_for(shape, &source);
  EXPECT_TRUE(same(found, figures[0])) << source;
  EXPECT_NE(source.find("tuner cache"), std::string::npos) << source;
}

}  // namespace
}  // namespace ccl::sim
