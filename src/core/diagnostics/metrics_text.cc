#include "core/diagnostics/metrics_text.h"

#include <charconv>
#include <cmath>

namespace ccl::metrics {

namespace {

bool name_char(char c, bool first, bool colon) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return letter || (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

bool valid_name(std::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, colon)) return false;
  }
  return true;
}

// The format's escapes: \ and newline always, " inside a label value's quotes.
std::string escaped(std::string_view text, bool quoted) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quoted) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Histogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

bool valid_metric_name(std::string_view name) { return valid_name(name, true); }
bool valid_label_name(std::string_view name) { return valid_name(name, false); }

std::string escape_label_value(std::string_view value) { return escaped(value, true); }

std::string escape_help(std::string_view help) { return escaped(help, false); }

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

void TextWriter::family(std::string_view name, MetricType type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  text_ += escape_help(help);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type_name(type);
  text_ += '\n';
}

void TextWriter::sample(std::string_view name, std::span<const Label> labels, uint64_t value) {
  sample_text(name, labels, std::to_string(value));
}

void TextWriter::sample(std::string_view name, std::span<const Label> labels, double value) {
  sample_text(name, labels, format_value(value));
}

void TextWriter::sample_text(std::string_view name, std::span<const Label> labels,
                             std::string_view value) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i != 0) text_ += ',';
      text_ += labels[i].name;
      text_ += "=\"";
      text_ += escape_label_value(labels[i].value);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += value;
  text_ += '\n';
}

}  // namespace ccl::metrics
