// The tuner cache (core/tuning/figures_cache.h): where it lives, what names an entry, entries
// written and read back, foreign or damaged entries ignored; and communicators: the first of a
// shape probes and keeps rank 0's figures, the next ones use exactly those on every rank (so
// every launch chooses alike), CCL_TUNER_CACHE=none probes every time.
#include "core/tuning/figures_cache.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/scoped_env.h"
#include "ccl/ccl.h"
#include "core/comm/comm.h"
#include "core/tuning/tuner.h"
#include "tuning_test_util.h"

namespace ccl::tune {
namespace {

using ccl::test::ScopedEnv;

// A fresh directory, removed with its files at the end.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/ccl_tuner_cache_XXXXXX";
    path_ = mkdtemp(name) != nullptr ? name : "";
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() {
    for (const std::string& f : files()) std::remove((path_ + "/" + f).c_str());
    rmdir((path_ + "/sub").c_str());
    rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    if (DIR* d = opendir(path_.c_str())) {
      while (const dirent* e = readdir(d)) {
        if (e->d_name[0] != '.' && std::string(e->d_name) != "sub") names.emplace_back(e->d_name);
      }
      closedir(d);
    }
    return names;
  }

 private:
  std::string path_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool same(const Figures& a, const Figures& b) {
  return a.shm.alpha_us == b.shm.alpha_us && a.shm.beta_gbps == b.shm.beta_gbps &&
         a.net.alpha_us == b.net.alpha_us && a.net.beta_gbps == b.net.beta_gbps &&
         a.direct.alpha_us == b.direct.alpha_us && a.direct.beta_gbps == b.direct.beta_gbps &&
         a.reduce_gbps == b.reduce_gbps;
}

TEST(TunerCache, DirectoryFromTheEnvironment) {
  {
    const ScopedEnv cache("CCL_TUNER_CACHE", "/some/where");
    EXPECT_EQ(figures_cache_dir(), "/some/where");
  }
  {
    const ScopedEnv cache("CCL_TUNER_CACHE", "none");
    EXPECT_EQ(figures_cache_dir(), "");
  }
  const ScopedEnv cache("CCL_TUNER_CACHE", nullptr);
  {
    const ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(figures_cache_dir(), "/xdg/ccl");
  }
  const ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  {
    const ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(figures_cache_dir(), "/home/u/.cache/ccl");
  }
  const ScopedEnv home("HOME", nullptr);
  EXPECT_EQ(figures_cache_dir(), "");
}

TEST(TunerCache, KeyNamesWhatTheFiguresDependOn) {
  const Shape two = test::one_host(2, 1 << 20);
  const std::string key = figures_cache_key("vm", two, {"shm", "shm"});
  EXPECT_NE(key.find("host vm "), std::string::npos) << key;
  EXPECT_NE(key.find("ranks 2 "), std::string::npos) << key;
  EXPECT_EQ(key, figures_cache_key("vm", two, {"shm"}));  // repeats and order do not count
  EXPECT_EQ(figures_cache_key("vm", two, {"tcp", "shm"}),
            figures_cache_key("vm", two, {"shm", "tcp"}));
  EXPECT_NE(key, figures_cache_key("other", two, {"shm"}));
  EXPECT_NE(key, figures_cache_key("vm", test::one_host(3, 1 << 20), {"shm"}));
  EXPECT_NE(key, figures_cache_key("vm", test::one_host(2, 0), {"shm"}));
  EXPECT_NE(key, figures_cache_key("vm", two, {"tcp"}));
  EXPECT_EQ(key.find('\n'), std::string::npos);
  EXPECT_EQ(figures_cache_key("a\nb", two, {}).find('\n'), std::string::npos);
  // One file per key, in the directory.
  EXPECT_EQ(figures_cache_path("/d", key), figures_cache_path("/d", key));
  EXPECT_NE(figures_cache_path("/d", key), figures_cache_path("/d", key + " "));
  EXPECT_EQ(figures_cache_path("/d", key).rfind("/d/tuner-", 0), 0u);
}

TEST(TunerCache, EntriesReadBackForTheirKeyOnly) {
  const TempDir dir;
  const std::string key = figures_cache_key("vm", test::one_host(2, 1 << 20), {"shm"});
  const std::string path = figures_cache_path(dir.path() + "/sub", key);  // made on writing
  EXPECT_FALSE(read_cached_figures(path, key));
  Figures f = default_figures();
  f.shm.alpha_us = 0.123456789;
  f.direct.beta_gbps = 1.0 / 3;
  ASSERT_TRUE(write_cached_figures(path, key, f));
  const auto back = read_cached_figures(path, key);
  ASSERT_TRUE(back);
  EXPECT_TRUE(same(*back, f));
  EXPECT_FALSE(read_cached_figures(path, key + " other"));
  // A damaged entry is a miss, not an error; writing it again repairs it.
  std::ofstream(path) << "# key: " << key << "\nshm.alpha_us -1\n";
  EXPECT_FALSE(read_cached_figures(path, key));
  ASSERT_TRUE(write_cached_figures(path, key, f));
  EXPECT_TRUE(read_cached_figures(path, key));
  std::remove(path.c_str());
}

TEST(TunerCache, AnUnwritableDirectoryIsNoError) {
  const TempDir dir;
  const std::string file = dir.path() + "/file";
  std::ofstream(file) << "not a directory";
  EXPECT_FALSE(write_cached_figures(file + "/tuner-x.txt", "k", default_figures()));
  std::remove(file.c_str());
}

// Every rank's figures, from communicators of `nranks` ranks (threads) made one after another.
std::vector<Figures> communicator_figures(int nranks) {
  cclUniqueId id;
  EXPECT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<Figures> figures(nranks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < nranks; ++r) {
    ranks.emplace_back([&, r] {
      cclComm_t comm = nullptr;
      ASSERT_EQ(cclCommInitRank(&comm, nranks, id, r), cclSuccess);
      figures[r] = comm->impl->tuner().figures();
      EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
    });
  }
  for (auto& t : ranks) t.join();
  return figures;
}

TEST(TunerCache, LaterCommunicatorsUseTheFirstOnesFigures) {
  const TempDir dir;
  const ScopedEnv cache("CCL_TUNER_CACHE", dir.path().c_str());
  const std::vector<Figures> first = communicator_figures(2);
  ASSERT_EQ(dir.files().size(), 1u);
  const std::string path = dir.path() + "/" + dir.files()[0];
  EXPECT_EQ(read_all(path).rfind("# key: host ", 0), 0u);
  EXPECT_TRUE(same(first[0], first[1]));
  const std::vector<Figures> second = communicator_figures(2);
  EXPECT_TRUE(same(second[0], first[0]));
  EXPECT_TRUE(same(second[1], first[0]));

  // What the entry says is what every rank uses (no probe ran: a probe never gives these).
  std::string text = read_all(path);
  const std::string key = text.substr(7, text.find('\n') - 7);
  Figures marked = first[0];
  marked.shm.alpha_us = 12.5;
  marked.reduce_gbps = 3.25;
  ASSERT_TRUE(write_cached_figures(path, key, marked));
  for (const Figures& f : communicator_figures(2)) EXPECT_TRUE(same(f, marked));
  // Another shape is another entry.
  communicator_figures(3);
  EXPECT_EQ(dir.files().size(), 2u);

  // none: the probe runs, and nothing is read or written.
  const ScopedEnv off("CCL_TUNER_CACHE", "none");
  for (const Figures& f : communicator_figures(2)) EXPECT_FALSE(same(f, marked));
  EXPECT_EQ(dir.files().size(), 2u);
}

}  // namespace
}  // namespace ccl::tune
