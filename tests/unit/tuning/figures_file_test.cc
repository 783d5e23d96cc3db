// The figures file: round trip through format_figures, defaults for keys left out, comments,
// and errors that name file:line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "../support/temp_file.h"
#include "core/tuning/tuner.h"
#include "tuning_test_util.h"

namespace ccl::tune {
namespace {

using test::error_of;

using ccl::test::TempFile;

void expect_same(const Figures& a, const Figures& b) {
  EXPECT_EQ(a.shm.alpha_us, b.shm.alpha_us);
  EXPECT_EQ(a.shm.beta_gbps, b.shm.beta_gbps);
  EXPECT_EQ(a.net.alpha_us, b.net.alpha_us);
  EXPECT_EQ(a.net.beta_gbps, b.net.beta_gbps);
  EXPECT_EQ(a.direct.alpha_us, b.direct.alpha_us);
  EXPECT_EQ(a.direct.beta_gbps, b.direct.beta_gbps);
  EXPECT_EQ(a.reduce_gbps, b.reduce_gbps);
}

TEST(FiguresFile, RoundTrip) {
  Figures f;
  f.shm = {0.1, 1.0 / 3};
  f.net = {27.25, 2.5e-7};
  f.direct = {0, 12345678.9};
  f.reduce_gbps = 7.000000000000001;
  const TempFile file(format_figures(f));
  expect_same(read_figures_file(file.path()), f);
  const TempFile defaults(format_figures(default_figures()));
  expect_same(read_figures_file(defaults.path()), default_figures());
}

TEST(FiguresFile, KeysLeftOutKeepTheirDefaults) {
  const TempFile file(
      "# probe of host A\n"
      "\n"
      "   net.alpha_us\t40   # after a re-route\n"
      "shm.beta_gbps 6.5\n");
  Figures expected = default_figures();
  expected.net.alpha_us = 40;
  expected.shm.beta_gbps = 6.5;
  expect_same(read_figures_file(file.path()), expected);
  const TempFile empty("");
  expect_same(read_figures_file(empty.path()), default_figures());
}

TEST(FiguresFile, ErrorsNameFileAndLine) {
  const char* bad[] = {
      "shm.alpha_us 1\nshm.latency 2\n",      // unknown key
      "shm.alpha_us 1\nshm.alpha_us 2\n",     // repeated
      "shm.alpha_us 1\nnet.beta_gbps\n",      // no value
      "shm.alpha_us 1\nnet.beta_gbps 3 4\n",  // two values
      "shm.alpha_us 1\nnet.beta_gbps 3GB\n",  // not a number
      "shm.alpha_us 1\nnet.alpha_us -2\n",    // negative alpha
      "shm.alpha_us 1\nreduce_gbps 0\n",      // zero bandwidth
      "shm.alpha_us 1\nnet.beta_gbps inf\n",  // not finite
      "shm.alpha_us 1\nnet.beta_gbps nan\n",
  };
  for (const char* text : bad) {
    const TempFile file(text);
    const auto [code, message] = error_of([&] { read_figures_file(file.path()); });
    EXPECT_EQ(code, cclInvalidArgument) << text;
    EXPECT_NE(message.find(file.path() + ":2:"), std::string::npos) << message;
  }
  // Zero latency is fine (a perfect link).
  const TempFile zero("direct.alpha_us 0\n");
  EXPECT_EQ(read_figures_file(zero.path()).direct.alpha_us, 0);
}

TEST(FiguresFile, MissingFile) {
  const auto [code, message] =
      error_of([] { read_figures_file("/nonexistent/ccl_tuner_figures"); });
  EXPECT_EQ(code, cclInvalidArgument);
  EXPECT_NE(message.find("/nonexistent/ccl_tuner_figures"), std::string::npos) << message;
}

}  // namespace
}  // namespace ccl::tune
