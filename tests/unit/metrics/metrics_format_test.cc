// The metrics' pure parts (src/core/diagnostics/metrics*.h): the Prometheus text writer (escaping,
// values, names), the size and time buckets at their edges, the counters a recorded operation
// bumps, and the rendered text of several communicators read back strictly (prom_text.h): every
// family once with HELP and TYPE, histograms cumulative with +Inf equal to their count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/diagnostics/metrics.h"
#include "core/diagnostics/metrics_text.h"
#include "prom_text.h"

namespace {

using namespace ccl::metrics;
using ccl::OpKind;
using ccl::test::parse_prom_text;

TEST(MetricsText, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_help("one \\ two\nthree \"quoted\""), "one \\\\ two\\nthree \"quoted\"");
}

TEST(MetricsText, FormatsValues) {
  EXPECT_EQ(format_value(3), "3");
  EXPECT_EQ(format_value(0.25), "0.25");
  EXPECT_EQ(format_value(1e-6), "1e-06");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  // Shortest round trip: what is written reads back as the same double.
  for (double v : {0.1, 1.0 / 3.0, 123456.789e-9, 4.5e15}) {
    EXPECT_EQ(std::stod(format_value(v)), v);
  }
}

TEST(MetricsText, ChecksNames) {
  EXPECT_TRUE(valid_metric_name("ccl_operations_total"));
  EXPECT_TRUE(valid_metric_name("a:b_c"));
  EXPECT_FALSE(valid_metric_name("1abc"));
  EXPECT_FALSE(valid_metric_name("a-b"));
  EXPECT_FALSE(valid_metric_name(""));
  EXPECT_TRUE(valid_label_name("collective"));
  EXPECT_FALSE(valid_label_name("a:b"));
}

TEST(MetricsText, WritesFamiliesAndSamples) {
  TextWriter w;
  w.family("x_total", MetricType::Counter, "Things.\nTwo lines.");
  w.sample("x_total", {{"k", "v\"1"}, {"r", "0"}}, uint64_t{18446744073709551615u});
  w.sample("x_total", {}, 0.5);
  EXPECT_EQ(w.text(),
            "# HELP x_total Things.\\nTwo lines.\n"
            "# TYPE x_total counter\n"
            "x_total{k=\"v\\\"1\",r=\"0\"} 18446744073709551615\n"
            "x_total 0.5\n");
}

TEST(MetricsBuckets, SizesArePowersOfSixteen) {
  EXPECT_EQ(std::string(size_bucket_label(size_bucket(0))), "le_256B");
  EXPECT_EQ(std::string(size_bucket_label(size_bucket(256))), "le_256B");
  EXPECT_EQ(std::string(size_bucket_label(size_bucket(257))), "le_4KiB");
  EXPECT_EQ(std::string(size_bucket_label(size_bucket(4096))), "le_4KiB");
  EXPECT_EQ(std::string(size_bucket_label(size_bucket(4097))), "le_64KiB");
  EXPECT_EQ(std::string(size_bucket_label(size_bucket(1 << 20))), "le_1MiB");
  EXPECT_EQ(std::string(size_bucket_label(size_bucket((1 << 20) + 1))), "le_16MiB");
  EXPECT_EQ(std::string(size_bucket_label(size_bucket(uint64_t{1} << 28))), "le_256MiB");
  EXPECT_EQ(std::string(size_bucket_label(size_bucket((uint64_t{1} << 28) + 1))), "gt_256MiB");
  EXPECT_EQ(size_bucket(UINT64_MAX), kSizeBuckets - 1);
  // Every edge: 16^(k+2) bytes is the last of bucket k, one more the first of bucket k+1.
  for (size_t k = 0; k + 1 < kSizeBuckets; ++k) {
    const uint64_t edge = uint64_t{1} << (4 * (k + 2));
    EXPECT_EQ(size_bucket(edge), k) << edge;
    EXPECT_EQ(size_bucket(edge + 1), k + 1) << edge;
    EXPECT_EQ(size_bucket(edge - 1), k == 0 ? 0 : k) << edge;
  }
}

TEST(MetricsBuckets, TimesAreUpperBoundsInclusive) {
  EXPECT_EQ(time_bucket(0), 0u);
  EXPECT_EQ(time_bucket(100), 0u);  // le="1e-07" holds exactly 100 ns
  EXPECT_EQ(time_bucket(101), 1u);
  EXPECT_EQ(time_bucket(1000), 2u);  // le="1e-06"
  EXPECT_EQ(time_bucket(3000), 3u);
  EXPECT_EQ(time_bucket(1'000'000'000), 14u);  // le="1"
  EXPECT_EQ(time_bucket(100'000'000'000), kTimeBounds - 1);
  EXPECT_EQ(time_bucket(100'000'000'001), kTimeBounds);  // +Inf
  for (size_t i = 1; i < kTimeBounds; ++i) EXPECT_LT(kTimeBoundsNs[i - 1], kTimeBoundsNs[i]);
}

TEST(CommMetrics, RecordsEachOutcome) {
  CommMetrics m;
  m.record(OpKind::AllReduce, 8, 5'000, Outcome::Completed);
  m.record(OpKind::AllReduce, 8, 5'000, Outcome::Completed);
  m.record(OpKind::AllReduce, 4000, 2'000'000, Outcome::Failed);
  m.record(OpKind::Broadcast, 1 << 20, 31'000'000'000, Outcome::TimedOut);
  m.record(OpKind::SendRecv, 0, 10, Outcome::PeerFailed);
  Snapshot s;
  m.snapshot_into(s);
  const auto& small = s.cells[static_cast<size_t>(OpKind::AllReduce)][0];
  EXPECT_EQ(small.ops, 2u);
  EXPECT_EQ(small.bytes, 16u);
  EXPECT_EQ(small.errors, 0u);
  const auto& failed = s.cells[static_cast<size_t>(OpKind::AllReduce)][1];
  EXPECT_EQ(failed.ops, 1u);
  EXPECT_EQ(failed.errors, 1u);
  EXPECT_EQ(failed.timeouts, 0u);
  EXPECT_EQ(failed.peer_failures, 0u);
  const auto& timed_out = s.cells[static_cast<size_t>(OpKind::Broadcast)][3];
  EXPECT_EQ(timed_out.errors, 1u);
  EXPECT_EQ(timed_out.timeouts, 1u);
  const auto& peer = s.cells[static_cast<size_t>(OpKind::SendRecv)][0];
  EXPECT_EQ(peer.errors, 1u);
  EXPECT_EQ(peer.peer_failures, 1u);
  EXPECT_EQ(s.time_buckets[static_cast<size_t>(OpKind::AllReduce)][time_bucket(5'000)], 2u);
  EXPECT_EQ(s.time_sum_ns[static_cast<size_t>(OpKind::AllReduce)], 2'010'000u);
  EXPECT_EQ(s.time_buckets[static_cast<size_t>(OpKind::Broadcast)][time_bucket(31'000'000'000)],
            1u);
}

TEST(MetricsRender, TwoCommunicatorsReadBackStrictly) {
  std::vector<Snapshot> comms(2);
  CommMetrics a, b;
  for (int i = 0; i < 5; ++i) a.record(OpKind::AllReduce, 4, 3'000 + i, Outcome::Completed);
  a.record(OpKind::AllReduce, 40'000, 90'000, Outcome::Completed);
  a.record(OpKind::AllGather, 300, 2'000'000'000, Outcome::TimedOut);
  b.record(OpKind::SendRecv, 100, 1'000, Outcome::PeerFailed);
  a.snapshot_into(comms[0]);
  b.snapshot_into(comms[1]);
  comms[0].comm = "world-0123456789ab";
  comms[0].rank = 3;
  comms[0].nranks = 4;
  comms[1].comm = "we\"ird\\name-ba9876543210";  // escaped on output, read back whole
  comms[1].rank = 1;
  comms[1].nranks = 2;
  const auto text = parse_prom_text(render(comms));

  EXPECT_EQ(text.types.at("ccl_communicator_ranks"), "gauge");
  for (const char* counter :
       {"ccl_operations_total", "ccl_operation_bytes_total", "ccl_operation_errors_total",
        "ccl_operation_timeouts_total", "ccl_peer_failures_total"}) {
    EXPECT_EQ(text.types.at(counter), "counter") << counter;
    EXPECT_FALSE(text.help.at(counter).empty());
  }
  EXPECT_EQ(text.types.at("ccl_operation_seconds"), "histogram");
  for (const auto& s : text.samples) {
    EXPECT_EQ(s.labels.count("comm"), 1u) << s.name;
    EXPECT_EQ(s.labels.count("rank"), 1u) << s.name;
  }

  const std::map<std::string, std::string> world = {{"comm", "world-0123456789ab"}, {"rank", "3"}};
  EXPECT_EQ(text.sum("ccl_communicator_ranks", world), 4);
  auto with = [&](std::map<std::string, std::string> m, const char* collective, const char* size) {
    m["collective"] = collective;
    if (size != nullptr) m["size"] = size;
    return m;
  };
  EXPECT_EQ(text.sum("ccl_operations_total", with(world, "allreduce", "le_256B")), 5);
  EXPECT_EQ(text.sum("ccl_operation_bytes_total", with(world, "allreduce", "le_256B")), 20);
  EXPECT_EQ(text.sum("ccl_operations_total", with(world, "allreduce", "le_64KiB")), 1);
  EXPECT_EQ(text.sum("ccl_operation_errors_total", with(world, "allreduce", nullptr)), 0);
  EXPECT_EQ(text.sum("ccl_operation_timeouts_total", with(world, "allgather", "le_4KiB")), 1);
  EXPECT_EQ(text.sum("ccl_operation_errors_total", with(world, "allgather", "le_4KiB")), 1);
  // Only what ran has series.
  EXPECT_TRUE(text.find("ccl_operations_total", with(world, "broadcast", nullptr)).empty());
  EXPECT_TRUE(text.find("ccl_operations_total", with(world, "allreduce", "le_4KiB")).empty());

  // The histogram: cumulative, +Inf equal to _count, _count the operations of the collective.
  const auto buckets = text.find("ccl_operation_seconds_bucket", with(world, "allreduce", nullptr));
  ASSERT_EQ(buckets.size(), kTimeBuckets);
  double previous = 0;
  for (const auto* s : buckets) {
    EXPECT_GE(s->value, previous);
    previous = s->value;
  }
  EXPECT_EQ(buckets.back()->labels.at("le"), "+Inf");
  EXPECT_EQ(buckets.back()->value, 6);
  EXPECT_EQ(text.sum("ccl_operation_seconds_count", with(world, "allreduce", nullptr)), 6);
  const auto le_3us =
      text.find("ccl_operation_seconds_bucket",
                {{"comm", "world-0123456789ab"}, {"collective", "allreduce"}, {"le", "3e-06"}});
  ASSERT_EQ(le_3us.size(), 1u);
  EXPECT_EQ(le_3us[0]->value, 1);  // 3000 ns exactly; 3001..3004 are above
  EXPECT_NEAR(text.sum("ccl_operation_seconds_sum", with(world, "allreduce", nullptr)),
              (15'010 + 90'000) * 1e-9, 1e-15);

  const std::map<std::string, std::string> other = {{"comm", "we\"ird\\name-ba9876543210"},
                                                    {"rank", "1"}};
  EXPECT_EQ(text.sum("ccl_peer_failures_total", with(other, "send/recv", "le_256B")), 1);
  EXPECT_EQ(text.sum("ccl_operation_bytes_total", with(other, "send/recv", "le_256B")), 100);
}

TEST(MetricsRender, NoCommunicatorsIsStillValidText) {
  const auto text = parse_prom_text(render({}));
  EXPECT_TRUE(text.samples.empty());
  EXPECT_EQ(text.types.size(), 7u);
}

}  // namespace
