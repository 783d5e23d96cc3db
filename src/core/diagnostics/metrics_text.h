// The Prometheus text exposition format (version 0.0.4), as node_exporter's textfile collector and
// a Prometheus server read it: per metric family a "# HELP" and a "# TYPE" line, then its samples,
// one per line: name{label="value",...} value. Label values escape \, " and newline; HELP text
// escapes \ and newline; values are integers, shortest round-trip decimals, +Inf, -Inf or NaN.
// A family's samples must follow its TYPE line with no other family's in between: callers write
// family by family. Pure (no ccl state): ccl-check (tools/ccl-check) compiles it in too.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace ccl::metrics {

struct Label {
  std::string_view name;   // [a-zA-Z_][a-zA-Z0-9_]*
  std::string_view value;  // any UTF-8; escaped on output
};

enum class MetricType { Counter, Gauge, Histogram };

class TextWriter {
 public:
  // Starts the family `name` ([a-zA-Z_:][a-zA-Z0-9_:]*): its HELP and TYPE lines. For a
  // histogram, its samples are name_bucket{...,le="..."}, name_sum and name_count.
  void family(std::string_view name, MetricType type, std::string_view help);
  void sample(std::string_view name, std::span<const Label> labels, uint64_t value);
  void sample(std::string_view name, std::span<const Label> labels, double value);
  void sample(std::string_view name, std::initializer_list<Label> labels, uint64_t value) {
    sample(name, std::span<const Label>(labels.begin(), labels.size()), value);
  }
  void sample(std::string_view name, std::initializer_list<Label> labels, double value) {
    sample(name, std::span<const Label>(labels.begin(), labels.size()), value);
  }
  const std::string& text() const { return text_; }

 private:
  void sample_text(std::string_view name, std::span<const Label> labels, std::string_view value);
  std::string text_;
};

std::string escape_label_value(std::string_view value);
std::string escape_help(std::string_view help);
// 3 -> "3", 0.25 -> "0.25", 1e-05 -> "1e-05", infinity -> "+Inf", NaN -> "NaN".
std::string format_value(double value);
bool valid_metric_name(std::string_view name);
bool valid_label_name(std::string_view name);

}  // namespace ccl::metrics
