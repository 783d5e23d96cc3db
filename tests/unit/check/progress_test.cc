// ccl-check's progress display: the status line's count and time left, and plain lines (not a
// terminal) written one per step.
#include "progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

using ccl_check::Progress;

TEST(Progress, LineCountsStepsAndEstimatesTheTimeLeft) {
  EXPECT_EQ(Progress::line("sweep: allreduce 8", 1, 10, 0.2), "[1/10] sweep: allreduce 8 (0:00)");
  // 2 s for the first 4 steps done (0.5 s each) leaves 7 steps: ~3.5 s.
  EXPECT_EQ(Progress::line("pairs: round 1 of 3", 5, 11, 2.0),
            "[5/11] pairs: round 1 of 3 (0:02, ~0:04 left)");
  EXPECT_EQ(Progress::line("ring", 12, 12, 75.0), "[12/12] ring (1:15)");
  // Steps beyond the plan (retests) never show a count above its total.
  EXPECT_EQ(Progress::line("retest", 13, 12, 3725.0), "[13/13] retest (1:02:05)");
}

// What a Progress (shown or not) writes into a file (never a terminal) for: plan(2), step("one"),
// note("a warning"), step("two").
std::string written(bool show) {
  std::FILE* f = std::tmpfile();
  if (f == nullptr) return "tmpfile failed";
  {
    Progress p(show, f);
    p.plan(2);
    p.step("one");
    p.note("a warning");
    p.step("two");
  }
  std::rewind(f);
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, f) != nullptr) text += buf;
  std::fclose(f);
  return text;
}

TEST(Progress, NotATerminalGivesOnePlainLinePerStep) {
  const std::string text = written(true);
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_NE(text.find("ccl-check: [1/2] one (0:00)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ccl-check: a warning\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ccl-check: [2/2] two ("), std::string::npos) << text;
}

TEST(Progress, HiddenShowsNothing) { EXPECT_EQ(written(false), ""); }

}  // namespace
