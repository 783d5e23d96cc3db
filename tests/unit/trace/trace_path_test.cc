// The trace files' names (src/core/trace/trace_path.h): ranks and communicators never share one.
#include "core/trace/trace_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>

namespace ccl::trace {
namespace {

TEST(TracePath, SubstitutesHostPidAndRank) {
  EXPECT_EQ(expand_trace_pattern("/t/%h-%p-%r.json", "node7", 4242, 3), "/t/node7-4242-3.json");
  EXPECT_EQ(expand_trace_pattern("/t/r%r/trace", "h", 1, 12), "/t/r12/trace");
  EXPECT_EQ(expand_trace_pattern("100%%-%r", "h", 1, 0), "100%-0");
  // Unknown or trailing % stay as they are.
  EXPECT_EQ(expand_trace_pattern("a%x%r%", "h", 1, 2), "a%x2%");
}

TEST(TracePath, WithoutRankInsertsItBeforeTheExtension) {
  EXPECT_EQ(expand_trace_pattern("trace.json", "h", 1, 0), "trace.0.json");
  EXPECT_EQ(expand_trace_pattern("trace", "h", 1, 5), "trace.5");
  EXPECT_EQ(expand_trace_pattern("/tmp/run.d/trace", "h", 1, 2), "/tmp/run.d/trace.2");
  EXPECT_EQ(expand_trace_pattern("/tmp/run.d/trace.tar.gz", "h", 1, 2),
            "/tmp/run.d/trace.tar.2.gz");
  EXPECT_EQ(expand_trace_pattern("/tmp/.trace", "h", 1, 1), "/tmp/.trace.1");
  EXPECT_EQ(expand_trace_pattern("%h.%p.json", "node", 77, 4), "node.77.4.json");
}

TEST(TracePath, TagsFollowTheRank) {
  EXPECT_EQ(expand_trace_pattern("trace.json", "h", 1, 0, "tp-ab"), "trace.0.tp-ab.json");
  EXPECT_EQ(expand_trace_pattern("trace", "h", 1, 3, "tp-ab.c1"), "trace.3.tp-ab.c1");
  EXPECT_EQ(expand_trace_pattern("/t/%r.json", "h", 1, 2, "ab"), "/t/2.ab.json");
  EXPECT_EQ(expand_trace_pattern("/t/r%r/trace", "h", 1, 2, "ab"), "/t/r2/trace.ab");
}

TEST(TracePath, InsertBeforeExtension) {
  EXPECT_EQ(insert_before_extension("a/b.json", "x"), "a/b.x.json");
  EXPECT_EQ(insert_before_extension("a.d/b", "x"), "a.d/b.x");
  EXPECT_EQ(insert_before_extension("", "x"), ".x");
}

TEST(TracePath, CommunicatorTagKeepsSafeCharactersOnly) {
  EXPECT_EQ(communicator_tag("", "5f3a9c01b2d4"), "5f3a9c01b2d4");
  EXPECT_EQ(communicator_tag("tp", "5f3a9c01b2d4"), "tp-5f3a9c01b2d4");
  EXPECT_EQ(communicator_tag("torch.distributed/x y", "ab"), "torch_distributed_x_y-ab");
}

// One process: the first communicator keeps the plain names (all its ranks: they share its tag),
// a later one adds its name and tag, a repeated path gets .c<N>.
TEST(TracePath, ClaimsNeverRepeatInAProcess) {
  const std::string dir = "/tmp/ccl_trace_claim_" + std::to_string(getpid());
  const std::string pattern = dir + "/trace.json";
  const std::string first0 = claim_trace_path(pattern, 0, "", "aaaaaaaaaaaa");
  const std::string first1 = claim_trace_path(pattern, 1, "", "aaaaaaaaaaaa");
  // Another test of this process may have connected a communicator first: then this one is
  // tagged too. Either way the names are distinct and carry the rank.
  if (first0 == dir + "/trace.0.json") {
    EXPECT_EQ(first1, dir + "/trace.1.json");
  } else {
    EXPECT_EQ(first0, dir + "/trace.0.aaaaaaaaaaaa.json");
    EXPECT_EQ(first1, dir + "/trace.1.aaaaaaaaaaaa.json");
  }
  EXPECT_EQ(claim_trace_path(pattern, 0, "tp", "bbbbbbbbbbbb"),
            dir + "/trace.0.tp-bbbbbbbbbbbb.json");
  EXPECT_EQ(claim_trace_path(pattern, 0, "tp", "bbbbbbbbbbbb"),
            dir + "/trace.0.tp-bbbbbbbbbbbb.c1.json");
  EXPECT_EQ(claim_trace_path(pattern, 0, "tp", "bbbbbbbbbbbb"),
            dir + "/trace.0.tp-bbbbbbbbbbbb.c2.json");
  EXPECT_EQ(claim_trace_path(pattern, 1, "tp", "bbbbbbbbbbbb"),
            dir + "/trace.1.tp-bbbbbbbbbbbb.json");
  EXPECT_EQ(claim_trace_path(dir + "/%r.json", 0, "", "cccccccccccc"),
            dir + "/0.cccccccccccc.json");
}

TEST(TracePath, ShortHostNameHasNoDomain) {
  const std::string host = short_host_name();
  EXPECT_FALSE(host.empty());
  EXPECT_EQ(host.find('.'), std::string::npos);
}

}  // namespace
}  // namespace ccl::trace
