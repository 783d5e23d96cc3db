// CCL_ALGO / CCL_PROTO: NCCL's syntax, case and blanks, per-collective entries and the errors.
#include <gtest/gtest.h>

#include <tuple>

#include "core/tuning/algo_selection.h"
#include "tuning_test_util.h"

namespace ccl::tune {
namespace {

using test::error_of;

// The algorithms `s` allows for `c`, as "direct,ring,..." in declaration order.
std::string allowed(const Selection& s, Collective c) {
  std::string out;
  for (Algorithm a : kAlgorithms) {
    if (!s.allows(c, a)) continue;
    if (!out.empty()) out += ',';
    out += algorithm_name(a);
  }
  return out;
}

std::string allowed_protocols(const Selection& s, Collective c) {
  std::string out;
  for (Protocol p : kProtocols) {
    if (!s.allows(c, p)) continue;
    if (!out.empty()) out += ',';
    out += protocol_name(p);
  }
  return out;
}

const std::string kAll =
    "direct,ring,tree,recursive_doubling,rabenseifner,hierarchical,pairwise,dissemination";

TEST(Selection, NamesRoundTrip) {
  for (Collective c : kCollectives) {
    Collective back{};
    ASSERT_TRUE(parse_collective(collective_name(c), &back));
    EXPECT_EQ(back, c);
  }
  for (Algorithm a : kAlgorithms) {
    Algorithm back{};
    ASSERT_TRUE(parse_algorithm(algorithm_name(a), &back));
    EXPECT_EQ(back, a);
  }
  for (Protocol p : kProtocols) {
    Protocol back{};
    ASSERT_TRUE(parse_protocol(protocol_name(p), &back));
    EXPECT_EQ(back, p);
  }
  Algorithm a = Algorithm::Tree;
  EXPECT_TRUE(parse_algorithm("Recursive_Doubling", &a));
  EXPECT_EQ(a, Algorithm::RecursiveDoubling);
  EXPECT_FALSE(parse_algorithm("collnet", &a));
  EXPECT_EQ(a, Algorithm::RecursiveDoubling);  // untouched
  EXPECT_STREQ(collective_name(Collective::ReduceScatter), "reducescatter");
  EXPECT_STREQ(protocol_name(Protocol::LL128), "LL128");
}

TEST(Selection, EmptyAllowsEverything) {
  for (const char* value : {"", "  ", " ; "}) {
    const Selection s = Selection::parse(value, value);
    for (Collective c : kCollectives) {
      EXPECT_EQ(allowed(s, c), kAll) << "'" << value << "'";
      EXPECT_EQ(allowed_protocols(s, c), "LL,LL128,Simple");
    }
  }
  const Selection def;
  EXPECT_EQ(allowed(def, Collective::Reduce), kAll);
}

TEST(Selection, ListAndExclusion) {
  const Selection s = Selection::parse("ring,tree", "^LL128");
  for (Collective c : kCollectives) {
    EXPECT_EQ(allowed(s, c), "ring,tree");
    EXPECT_EQ(allowed_protocols(s, c), "LL,Simple");
  }
  const Selection x = Selection::parse("^tree,direct", "simple");
  for (Collective c : kCollectives) {
    EXPECT_EQ(allowed(x, c),
              "ring,recursive_doubling,rabenseifner,hierarchical,pairwise,dissemination");
    EXPECT_EQ(allowed_protocols(x, c), "Simple");
  }
}

TEST(Selection, CaseAndBlanksDoNotMatter) {
  const Selection s = Selection::parse(" AllReduce : TREE , Ring ; broadcast:^ Tree ;", "\tll ");
  EXPECT_EQ(allowed(s, Collective::AllReduce), "ring,tree");
  EXPECT_EQ(allowed(s, Collective::Broadcast),
            "direct,ring,recursive_doubling,rabenseifner,hierarchical,pairwise,dissemination");
  EXPECT_EQ(allowed_protocols(s, Collective::AllGather), "LL");
}

TEST(Selection, PerCollectiveEntries) {
  const Selection s = Selection::parse("allreduce:tree,ring;broadcast:^tree", "");
  EXPECT_EQ(allowed(s, Collective::AllReduce), "ring,tree");
  EXPECT_EQ(allowed(s, Collective::Broadcast),
            "direct,ring,recursive_doubling,rabenseifner,hierarchical,pairwise,dissemination");
  // Not named and no default entry: unrestricted.
  EXPECT_EQ(allowed(s, Collective::Reduce), kAll);
  EXPECT_EQ(allowed(s, Collective::AllGather), kAll);
  EXPECT_EQ(allowed(s, Collective::ReduceScatter), kAll);
  EXPECT_EQ(allowed(s, Collective::AlltoAll), kAll);
  EXPECT_EQ(allowed(s, Collective::Barrier), kAll);
}

TEST(Selection, FirstEntryWithoutCollectiveCoversTheOthers) {
  const Selection s = Selection::parse("ring;allreduce:tree;reduce:^ring", "LL;broadcast:simple");
  EXPECT_EQ(allowed(s, Collective::AllReduce), "tree");
  EXPECT_EQ(allowed(s, Collective::Reduce),
            "direct,tree,recursive_doubling,rabenseifner,hierarchical,pairwise,dissemination");
  EXPECT_EQ(allowed(s, Collective::Broadcast), "ring");
  EXPECT_EQ(allowed(s, Collective::AllGather), "ring");
  EXPECT_EQ(allowed_protocols(s, Collective::Broadcast), "Simple");
  EXPECT_EQ(allowed_protocols(s, Collective::AllReduce), "LL");
}

TEST(Selection, ErrorsNameTheVariableTheTokenAndTheValidNames) {
  auto [code, message] = error_of([] { Selection::parse("ring,foo", ""); });
  EXPECT_EQ(code, cclInvalidUsage);
  EXPECT_NE(message.find("CCL_ALGO"), std::string::npos) << message;
  EXPECT_NE(message.find("'foo'"), std::string::npos) << message;
  EXPECT_NE(message.find("recursive_doubling"), std::string::npos) << message;

  std::tie(code, message) = error_of([] { Selection::parse("", "LL,LL256"); });
  EXPECT_EQ(code, cclInvalidUsage);
  EXPECT_NE(message.find("CCL_PROTO"), std::string::npos) << message;
  EXPECT_NE(message.find("'LL256'"), std::string::npos) << message;
  EXPECT_NE(message.find("Simple"), std::string::npos) << message;

  std::tie(code, message) = error_of([] { Selection::parse("gather:ring", ""); });
  EXPECT_EQ(code, cclInvalidUsage);
  EXPECT_NE(message.find("'gather'"), std::string::npos) << message;
  EXPECT_NE(message.find("reducescatter"), std::string::npos) << message;
  EXPECT_NE(message.find("barrier"), std::string::npos) << message;
}

TEST(Selection, MalformedValuesAreRejected) {
  for (const char* bad : {"ring,,tree", "^", "allreduce:", "allreduce:ring;allreduce:tree",
                          "allreduce:ring;tree", "ring;tree", ",ring", "ring tree"}) {
    const auto [code, message] = error_of([&] { Selection::parse(bad, ""); });
    EXPECT_EQ(code, cclInvalidUsage) << "'" << bad << "'";
    EXPECT_NE(message.find("CCL_ALGO"), std::string::npos) << message;
  }
  const auto [code, message] = error_of([] { Selection::parse("", "^"); });
  EXPECT_EQ(code, cclInvalidUsage);
  EXPECT_NE(message.find("CCL_PROTO"), std::string::npos) << message;
}

}  // namespace
}  // namespace ccl::tune
