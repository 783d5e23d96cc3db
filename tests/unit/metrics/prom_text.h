// A strict reader of the Prometheus text format for the tests: every line is a "# HELP", a
// "# TYPE" or a sample (name{label="value",...} value); a family's HELP and TYPE come once,
// before its samples, and its samples are not interleaved with another family's. Anything else
// fails (ADD_FAILURE naming the line). prometheus_client's parser reads the same files in the
// integration test (tests/integration/metrics_test.py).
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ccl::test {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromText {
  std::map<std::string, std::string> types;  // family -> counter, gauge, histogram
  std::map<std::string, std::string> help;
  std::vector<PromSample> samples;

  // The samples of `name` whose labels include every one of `match`.
  std::vector<const PromSample*> find(const std::string& name,
                                      const std::map<std::string, std::string>& match) const {
    std::vector<const PromSample*> out;
    for (const PromSample& s : samples) {
      if (s.name != name) continue;
      bool all = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        all = all && it != s.labels.end() && it->second == v;
      }
      if (all) out.push_back(&s);
    }
    return out;
  }
  // The sum of those samples' values (0 when none).
  double sum(const std::string& name, const std::map<std::string, std::string>& match) const {
    double total = 0;
    for (const PromSample* s : find(name, match)) total += s->value;
    return total;
  }
};

// The family a sample name belongs to: a histogram's _bucket, _sum and _count go to their base.
inline std::string prom_family(const std::string& name,
                               const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string_view s(suffix);
    if (name.size() > s.size() && name.ends_with(s)) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

inline PromText parse_prom_text(const std::string& text) {
  PromText out;
  std::set<std::string> closed;  // families whose samples ended
  std::string current;
  size_t pos = 0;
  int lineno = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) {
      ADD_FAILURE() << "the text does not end with a newline";
      break;
    }
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++lineno;
    const std::string where = "line " + std::to_string(lineno) + ": " + line;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      if (space == std::string::npos) {
        ADD_FAILURE() << where;
        continue;
      }
      const std::string name = rest.substr(0, space);
      auto& table = line[2] == 'H' ? out.help : out.types;
      if (table.count(name) != 0 || closed.count(name) != 0) {
        ADD_FAILURE() << "a second HELP/TYPE of " << name << " at " << where;
      }
      table[name] = rest.substr(space + 1);
      if (!current.empty() && current != name) closed.insert(current);
      current = name;
      continue;
    }
    PromSample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find("=\"", i);
        if (eq == std::string::npos) break;
        const std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        if (s.labels.count(key) != 0) ADD_FAILURE() << "label " << key << " twice: " << where;
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size() || line[i] != '}') {
        ADD_FAILURE() << "unterminated labels: " << where;
        continue;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      ADD_FAILURE() << "no value: " << where;
      continue;
    }
    const std::string value = line.substr(i + 1);
    if (value == "+Inf") {
      s.value = std::numeric_limits<double>::infinity();
    } else {
      size_t used = 0;
      try {
        s.value = std::stod(value, &used);
      } catch (...) {
        used = 0;
      }
      if (used != value.size() || value.empty()) ADD_FAILURE() << "bad value: " << where;
    }
    const std::string family = prom_family(s.name, out.types);
    if (out.types.count(family) == 0) ADD_FAILURE() << "a sample before its TYPE: " << where;
    if (family != current) ADD_FAILURE() << "a sample outside its family's lines: " << where;
    out.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace ccl::test
