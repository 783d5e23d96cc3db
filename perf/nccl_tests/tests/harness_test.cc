// Runs every *_perf main built against a one-rank fake libccl (fake_ccl.cc) and checks what they
// print, write and return.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
  int status = -1;
  std::string out;
};

Outcome run(const std::string& command) {
  Outcome r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::vector<std::vector<std::string>> rows(const std::string& out) {
  std::vector<std::vector<std::string>> result;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    result.push_back(f);
  }
  return result;
}

std::string fake(const char* coll) {
  return std::string(FAKE_PERF_DIR) + "/" + coll + "_perf_fake";
}

const std::string kAllReduce = fake("all_reduce");
const std::string kBroadcast = fake("broadcast");

const char* const kCollectives[] = {"all_reduce",     "broadcast", "reduce",  "all_gather",
                                    "reduce_scatter", "alltoall",  "sendrecv"};
// nccl-tests does not check alltoall and sendrecv in place (N/A).
bool checked_in_place(const std::string& coll) { return coll != "alltoall" && coll != "sendrecv"; }

TEST(Harness, AllReduceSweepPrintsNcclTestsTable) {
  const Outcome r = run(kAllReduce + " -b 8 -e 1K -f 4 -n 3 -w 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 4(factor)"),
            std::string::npos);
  EXPECT_NE(r.out.find("# Using devices\n#  Rank  0 Group  0 Pid"), std::string::npos);
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n#\n"),
            std::string::npos)
      << r.out;
  const auto table = rows(r.out);
  ASSERT_EQ(table.size(), 4u);  // 8, 32, 128, 512
  const char* sizes[] = {"8", "32", "128", "512"};
  for (size_t i = 0; i < table.size(); ++i) {
    ASSERT_EQ(table[i].size(), 13u) << r.out;
    EXPECT_EQ(table[i][0], sizes[i]);
    EXPECT_EQ(table[i][2], "float");
    EXPECT_EQ(table[i][3], "sum");
    EXPECT_EQ(table[i][4], "-1");
    EXPECT_EQ(table[i][8], "0");
    EXPECT_EQ(table[i][12], "0");
  }
}

TEST(Harness, EveryTypeAndOpIsCheckedAndJsonWritten) {
  const std::string json = ::testing::TempDir() + "/perf_harness_test.json";
  const Outcome r = run(kAllReduce + " -b 1 -e 64 -f 8 -n 1 -d all -o all -c 2 --json " + json);
  ASSERT_EQ(r.status, 0) << r.out;
  // 1, 8, 64 bytes; 1-byte types have 3 rows, 2-byte 2, 4- and 8-byte 2 (1 byte: no element).
  EXPECT_EQ(rows(r.out).size(), 5u * (4 * 3 + 8 * 2));
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"program\": \"all_reduce_perf\""), std::string::npos);
  EXPECT_NE(text.str().find("\"type\": \"f8e5m2\""), std::string::npos);
  EXPECT_NE(text.str().find("\"redop\": \"avg\""), std::string::npos);
  EXPECT_NE(text.str().find("\"ok\": true"), std::string::npos);
  std::remove(json.c_str());
}

TEST(Harness, WrongResultsFailTheRun) {
  const Outcome r = run("FAKE_CCL_CORRUPT=1 " + kAllReduce + " -b 8 -e 32 -f 4 -n 1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 4 FAILED"), std::string::npos) << r.out;
  for (const auto& row : rows(r.out)) {
    EXPECT_EQ(row[8], "1");  // one flipped element per operation
    EXPECT_EQ(row[12], "1");
  }
  // Not checked: nothing to see, N/A.
  const Outcome unchecked = run("FAKE_CCL_CORRUPT=1 " + kAllReduce + " -b 8 -e 8 -c 0");
  EXPECT_EQ(unchecked.status, 0) << unchecked.out;
  ASSERT_EQ(rows(unchecked.out).size(), 1u);
  EXPECT_EQ(rows(unchecked.out)[0][8], "N/A");
}

TEST(Harness, ModesAndFlags) {
  for (const char* flags : {"-z 1", "-z 2", "-y 1", "-m 3", "-a 0", "-a 2", "-a 3", "-C 1", "-T 5",
                            "-N 2", "-R 1", "-G 2", "-i 8 -b 8 -e 24"}) {
    const Outcome r = run(kAllReduce + " -b 8 -e 16 -f 2 -n 2 " + flags);
    EXPECT_EQ(r.status, 0) << flags << "\n" << r.out;
    EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << flags;
  }
  EXPECT_NE(run(kAllReduce + " -C 1 -b 8 -e 8").out.find("cputime"), std::string::npos);
  EXPECT_EQ(rows(run(kAllReduce + " -N 3 -b 8 -e 8").out).size(), 3u);
}

TEST(Harness, BadCommandLines) {
  Outcome r = run(kAllReduce + " -t 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("nthreads"), std::string::npos);
  EXPECT_NE(r.out.find("USAGE"), std::string::npos);
  EXPECT_EQ(run(kAllReduce + " -d nosuchtype").status, 1);
  r = run(kAllReduce + " -h");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("USAGE: all_reduce_perf"), std::string::npos);
  r = run(kBroadcast + " -r 1 -b 8 -e 8");  // one rank: root 1 does not exist
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("root 1"), std::string::npos);
}

// --memory device where there is no GPU (here, and every machine without one): a failed run
// that says why, on every rank, before any row. With a GPU it runs as the host sweep does
// (scripts/device-check.sh).
TEST(Harness, DeviceMemoryWithoutAGpuSaysWhy) {
  if (access("/dev/nvidiactl", F_OK) == 0) GTEST_SKIP() << "an NVIDIA driver is present";
  const Outcome r = run(kAllReduce + " --memory device -b 8 -e 64 -f 2");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--memory device: "), std::string::npos) << r.out;
  for (const auto& row : rows(r.out)) {  // the error line only: no row of sizes
    EXPECT_FALSE(!row.empty() && std::isdigit(static_cast<unsigned char>(row[0][0]))) << r.out;
  }
}

TEST(Harness, BroadcastRowsNameNoOpAndTheRoot) {
  const Outcome r = run(kBroadcast + " -b 4 -e 64 -f 4 -r all -d all");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto table = rows(r.out);
  ASSERT_FALSE(table.empty());
  for (const auto& row : table) {
    EXPECT_EQ(row[3], "none");
    EXPECT_EQ(row[4], "0");
    EXPECT_EQ(row[8], "0");
  }
}

TEST(Harness, EveryCollectiveChecksEveryTypeAndOp) {
  for (const char* coll : kCollectives) {
    const Outcome r = run(fake(coll) + " -b 8 -e 1K -f 8 -n 1 -w 1 -d all -o all -c 1");
    ASSERT_EQ(r.status, 0) << coll << "\n" << r.out;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << coll;
    const auto table = rows(r.out);
    ASSERT_FALSE(table.empty()) << coll;
    bool saw_op = false;
    for (const auto& row : table) {
      ASSERT_EQ(row.size(), 13u) << coll << "\n" << r.out;
      EXPECT_EQ(row[8], "0") << coll;
      EXPECT_EQ(row[12], checked_in_place(coll) ? "0" : "N/A") << coll;
      saw_op |= row[3] == "prod";
    }
    // Only the reductions loop over ops; the others print "none".
    const std::string c = coll;
    EXPECT_EQ(saw_op, c == "all_reduce" || c == "reduce" || c == "reduce_scatter") << coll;
  }
}

TEST(Harness, EveryCollectiveSeesWrongResults) {
  for (const char* coll : kCollectives) {
    const Outcome r = run("FAKE_CCL_CORRUPT=1 " + fake(coll) + " -b 64 -e 256 -f 4 -n 1 -c 1");
    EXPECT_EQ(r.status, 1) << coll << "\n" << r.out;
    const bool in_place = checked_in_place(coll);
    // Two rows, one flipped element in each checked operation.
    const std::string want =
        std::string("# Out of bounds values : ") + (in_place ? "4" : "2") + " FAILED";
    EXPECT_NE(r.out.find(want), std::string::npos) << coll << "\n" << r.out;
    const auto table = rows(r.out);
    EXPECT_EQ(table.size(), 2u) << coll;
    for (const auto& row : table) {
      EXPECT_EQ(row[8], "1") << coll;
      EXPECT_EQ(row[12], in_place ? "1" : "N/A") << coll;
    }
  }
}

TEST(Harness, ReduceRowsNameTheOpAndTheRoot) {
  const Outcome r = run(fake("reduce") + " -b 64 -e 64 -o max -r 0");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto table = rows(r.out);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0][3], "max");
  EXPECT_EQ(table[0][4], "0");
  EXPECT_EQ(run(fake("reduce") + " -r 1 -b 8 -e 8").status, 2);  // no rank 1
  // The gather and scatter collectives print the whole buffer as the size, the piece as count.
  const auto ag = rows(run(fake("all_gather") + " -b 1000 -e 1000").out);
  ASSERT_EQ(ag.size(), 1u);
  EXPECT_EQ(ag[0][0], "992");  // 250 floats, rounded down to 16 bytes
  EXPECT_EQ(ag[0][1], "248");
  EXPECT_EQ(ag[0][3], "none");
  EXPECT_EQ(ag[0][4], "-1");
}

TEST(Harness, HelpNamesEachBinary) {
  for (const char* coll : kCollectives) {
    const Outcome r = run(fake(coll) + " -h");
    EXPECT_EQ(r.status, 0) << coll;
    EXPECT_NE(r.out.find(std::string("USAGE: ") + coll + "_perf"), std::string::npos) << r.out;
  }
}

}  // namespace
