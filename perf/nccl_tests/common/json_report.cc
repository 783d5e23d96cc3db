#include "json_report.h"

#include <cmath>
#include <cstdio>

#include "datatype.h"

namespace ccl::perf {
namespace {

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

class Object {
 public:
  explicit Object(int indent) : indent_(indent) {}
  Object& raw(const std::string& key, const std::string& value) {
    body_ += (body_.empty() ? "" : ",\n") + std::string(indent_ + 2, ' ') + json_string(key) +
             ": " + value;
    return *this;
  }
  Object& num(const std::string& key, double v) { return raw(key, number(v)); }
  Object& integer(const std::string& key, long long v) { return raw(key, std::to_string(v)); }
  Object& str(const std::string& key, const std::string& v) { return raw(key, json_string(v)); }
  Object& boolean(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  std::string done() const { return "{\n" + body_ + "\n" + std::string(indent_, ' ') + "}"; }

 private:
  int indent_;
  std::string body_;
};

std::string array(const std::vector<std::string>& items, int indent) {
  if (items.empty()) return "[]";
  std::string s = "[\n";
  for (size_t i = 0; i < items.size(); ++i) {
    s += std::string(indent + 2, ' ') + items[i] + (i + 1 < items.size() ? ",\n" : "\n");
  }
  return s + std::string(indent, ' ') + "]";
}

std::string inline_array(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s + "]";
}

std::string measurement(const Measurement& m, int indent) {
  Object o(indent);
  o.num("time_us", m.time_us).num("algbw", m.algbw).num("busbw", m.busbw);
  if (m.wrong) {
    o.integer("wrong", *m.wrong);
  } else {
    o.raw("wrong", "null");
  }
  return o.done();
}

std::string parameters(const Options& p, int indent) {
  std::vector<std::string> ops, types;
  for (auto op : p.ops) ops.push_back(json_string(op_name(op)));
  for (auto t : p.types) types.push_back(json_string(type_info(t).name));
  Object o(indent);
  o.integer("nthreads", p.nthreads)
      .integer("ngpus", p.ngpus)
      .integer("minbytes", static_cast<long long>(p.min_bytes))
      .integer("maxbytes", static_cast<long long>(p.max_bytes))
      .integer("stepbytes", static_cast<long long>(p.step_bytes))
      .integer("stepfactor", static_cast<long long>(p.step_factor))
      .integer("iters", p.iters)
      .integer("warmup_iters", p.warmup_iters)
      .integer("agg_iters", p.agg_iters)
      .integer("run_cycles", p.run_cycles)
      .integer("check", p.check)
      .raw("ops", inline_array(ops))
      .raw("datatypes", inline_array(types))
      .integer("root", p.root)
      .integer("blocking", p.blocking)
      .integer("stream_null", p.stream_null)
      .integer("timeout", p.timeout_s)
      .integer("report_cputime", p.report_cputime)
      .integer("average", static_cast<int>(p.average));
  return o.done();
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string to_json(const RunReport& r) {
  std::vector<std::string> ranks;
  for (const auto& d : r.ranks) {
    Object o(4);
    o.integer("rank", d.rank).integer("pid", d.pid).str("host", d.host).integer("device", d.device);
    ranks.push_back(o.done());
  }
  std::vector<std::string> rows;
  for (const auto& row : r.rows) {
    Object o(4);
    o.integer("size", static_cast<long long>(row.size))
        .integer("count", static_cast<long long>(row.count))
        .str("type", row.type)
        .str("redop", row.redop)
        .integer("root", row.root)
        .raw("out_of_place", measurement(row.out_of_place, 6))
        .raw("in_place", measurement(row.in_place, 6));
    rows.push_back(o.done());
  }
  Object doc(0);
  doc.str("program", r.program)
      .str("collective", r.collective)
      .integer("ccl_version", r.ccl_version)
      .integer("nranks", r.nranks)
      .raw("parameters", parameters(r.options, 2))
      .raw("ranks", array(ranks, 2))
      .raw("results", array(rows, 2))
      .integer("out_of_bounds", r.out_of_bounds)
      .num("avg_busbw", r.avg_busbw)
      .boolean("ok", r.out_of_bounds == 0);
  return doc.done() + "\n";
}

}  // namespace ccl::perf
