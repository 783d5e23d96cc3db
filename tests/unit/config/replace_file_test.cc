// replace_file (base/replace_file.h): a file is replaced whole, through a temporary file that is
// never left behind, also when threads of one process replace the same file at once.
#include "base/replace_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_file.h"

namespace {

using ccl::replace_file;
using ccl::test::TempDir;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

size_t entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(ReplaceFile, TheFileIsReplacedWhole) {
  const TempDir dir("ccl_replace_file");
  const std::string path = dir.path() + "/ccl.prom";
  ASSERT_EQ(replace_file(path, "old\n"), "");
  ASSERT_EQ(replace_file(path, "new text\nover two lines\n"), "");
  EXPECT_EQ(read(path), "new text\nover two lines\n");
  EXPECT_EQ(entries(dir.path()), 1u);  // no temporary file left
}

TEST(ReplaceFile, AFolderThatIsMissingIsAnErrorNamingTheFile) {
  const TempDir dir("ccl_replace_file");
  const std::string error = replace_file(dir.path() + "/missing/x.prom", "x\n");
  EXPECT_NE(error.find("cannot create " + dir.path() + "/missing/x.prom."), std::string::npos)
      << error;
  EXPECT_EQ(entries(dir.path()), 0u);
}

// Ranks as threads of one process write the same tuner cache entry: each write has its own
// temporary file, so the file always holds one writer's whole text.
TEST(ReplaceFile, ThreadsOfOneProcessNeverShareATemporaryFile) {
  const TempDir dir("ccl_replace_file");
  const std::string path = dir.path() + "/entry.txt";
  constexpr int kThreads = 4;
  constexpr int kWrites = 50;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string text(1000 + t, static_cast<char>('a' + t));
      for (int i = 0; i < kWrites && failures[t].empty(); ++i)
        failures[t] = replace_file(path, text);
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  const std::string text = read(path);
  ASSERT_GE(text.size(), 1000u);
  EXPECT_EQ(text, std::string(text.size(), text[0]));  // one writer's text, whole
  EXPECT_EQ(text.size(), 1000u + static_cast<size_t>(text[0] - 'a'));
  EXPECT_EQ(entries(dir.path()), 1u);
}

}  // namespace
