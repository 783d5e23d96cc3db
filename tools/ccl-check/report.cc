#include "report.h"

#include <libxml/xmlwriter.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace ccl_check {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string size_text(size_t bytes) {
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0)
    return std::to_string(bytes >> 30) + "G";
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + "M";
  if (bytes >= (size_t{1} << 10) && bytes % (size_t{1} << 10) == 0)
    return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

std::vector<Check> sweep_checks(const std::vector<SweepPoint>& sweep,
                                const std::vector<Threshold>& thresholds,
                                const nlohmann::json& baseline, double tolerance) {
  std::vector<Check> checks;
  for (const SweepPoint& p : sweep) {
    if (p.collective != "allreduce") continue;
    Check c{.name = "allreduce " + size_text(p.bytes) + " results"};
    if (!p.correct) {
      c.passed = false;
      c.code = "CCL-CHECK-001";
      c.reason = "allreduce of " + size_text(p.bytes) + " returned wrong values";
    }
    checks.push_back(c);
  }
  for (const Threshold& t : thresholds) {
    const SweepPoint* p = nullptr;
    for (const SweepPoint& s : sweep) {
      if (s.collective == t.collective && s.bytes == t.bytes) p = &s;
    }
    Check c{.name = t.collective + " " + size_text(t.bytes) +
                    (t.min_busbw_gbps ? " busbw" : " latency")};
    if (p == nullptr) {
      c.passed = false;
      c.code = t.min_busbw_gbps ? "CCL-CHECK-101" : "CCL-CHECK-102";
      c.reason = "threshold " + t.text + ": the sweep did not measure " + t.collective + " at " +
                 size_text(t.bytes) + " (see -b, -e, -f, --collectives)";
    } else if (t.min_busbw_gbps && p->busbw_gbps < *t.min_busbw_gbps) {
      c.passed = false;
      c.code = "CCL-CHECK-101";
      c.reason = t.collective + " " + size_text(t.bytes) + " busbw " + fixed(p->busbw_gbps, 2) +
                 " GB/s < " + fixed(*t.min_busbw_gbps, 2) + " GB/s";
    } else if (t.max_latency_us && p->time_us > *t.max_latency_us) {
      c.passed = false;
      c.code = "CCL-CHECK-102";
      c.reason = t.collective + " " + size_text(t.bytes) + " latency " + fixed(p->time_us, 1) +
                 " us > " + fixed(*t.max_latency_us, 1) + " us";
    }
    checks.push_back(c);
  }
  if (baseline.is_object() && baseline.contains("sweep")) {
    for (const auto& b : baseline["sweep"]) {
      const std::string coll = b.value("collective", "");
      const size_t bytes = b.value("bytes", size_t{0});
      const double then = b.value("busbw_gbps", 0.0);
      for (const SweepPoint& p : sweep) {
        if (p.collective != coll || p.bytes != bytes || then <= 0) continue;
        Check c{.name = coll + " " + size_text(bytes) + " against the baseline"};
        if (p.busbw_gbps < (1.0 - tolerance) * then) {
          c.passed = false;
          c.code = "CCL-CHECK-103";
          c.reason = coll + " " + size_text(bytes) + " busbw " + fixed(p.busbw_gbps, 2) +
                     " GB/s is more than " + fixed(tolerance * 100, 0) + "% below the baseline's " +
                     fixed(then, 2) + " GB/s";
        }
        checks.push_back(c);
      }
    }
  }
  return checks;
}

std::vector<Check> pair_checks(const std::vector<Culprit>& culprits, size_t pairs_measured) {
  std::vector<Check> checks;
  for (const Culprit& c : culprits) {
    if (c.kind == Culprit::Host) {
      checks.push_back({.name = "host " + c.host,
                        .passed = false,
                        .code = "CCL-CHECK-202",
                        .reason = "slow host: " + c.reason,
                        .hosts = {c.host}});
    } else {
      const std::string link = c.host == c.peer_host ? c.host : c.host + "-" + c.peer_host;
      checks.push_back({.name = "link " + link,
                        .passed = false,
                        .code = "CCL-CHECK-201",
                        .reason = "slow link " + link + ": " + c.reason,
                        .hosts = c.host == c.peer_host
                                     ? std::vector<std::string>{c.host}
                                     : std::vector<std::string>{c.host, c.peer_host}});
    }
  }
  if (checks.empty()) {
    checks.push_back({.name = "pairwise links (" + std::to_string(pairs_measured) + " pairs)"});
  }
  return checks;
}

bool all_passed(const std::vector<Check>& checks) {
  for (const Check& c : checks) {
    if (!c.passed) return false;
  }
  return true;
}

std::string verdict_lines(const std::vector<std::string>& hosts, const std::vector<Check>& checks) {
  std::ostringstream out;
  std::set<std::string> unique(hosts.begin(), hosts.end());
  for (const std::string& h : unique) {
    std::vector<const Check*> mine;
    for (const Check& c : checks) {
      if (c.passed) continue;
      for (const std::string& blamed : c.hosts) {
        if (blamed == h) mine.push_back(&c);
      }
    }
    if (mine.empty()) {
      out << h << " | PASS\n";
    } else {
      for (const Check* c : mine) out << h << " | FAIL " << c->code << " " << c->reason << "\n";
    }
  }
  size_t failed = 0;
  for (const Check& c : checks) {
    if (c.passed) continue;
    ++failed;
    if (c.hosts.empty()) out << "cluster | FAIL " << c.code << " " << c.reason << "\n";
  }
  if (failed == 0) {
    out << "ccl-check: PASS (" << checks.size() << " checks, " << unique.size() << " hosts)\n";
  } else {
    out << "ccl-check: FAIL (" << failed << " of " << checks.size() << " checks, " << unique.size()
        << " hosts)\n";
  }
  return out.str();
}

nlohmann::json to_json(const std::vector<SweepPoint>& sweep) {
  nlohmann::json out = nlohmann::json::array();
  for (const SweepPoint& p : sweep) {
    out.push_back({{"collective", p.collective},
                   {"bytes", p.bytes},
                   {"time_us", p.time_us},
                   {"algbw_gbps", p.algbw_gbps},
                   {"busbw_gbps", p.busbw_gbps},
                   {"runs", p.runs},
                   {"correct", p.correct}});
  }
  return out;
}

nlohmann::json to_json(const std::vector<PairResult>& pairs,
                       const std::vector<std::string>& host_of_rank) {
  nlohmann::json out = nlohmann::json::array();
  for (const PairResult& p : pairs) {
    out.push_back({{"ranks", {p.ranks.first, p.ranks.second}},
                   {"hosts",
                    {host_of_rank.at(static_cast<size_t>(p.ranks.first)),
                     host_of_rank.at(static_cast<size_t>(p.ranks.second))}},
                   {"latency_us", p.latency_us},
                   {"bandwidth_gbps", p.bandwidth_gbps}});
  }
  return out;
}

nlohmann::json to_json(const std::vector<Check>& checks) {
  nlohmann::json out = nlohmann::json::array();
  for (const Check& c : checks) {
    out.push_back({{"name", c.name},
                   {"passed", c.passed},
                   {"code", c.code},
                   {"reason", c.reason},
                   {"hosts", c.hosts}});
  }
  return out;
}

std::string to_junit(const std::vector<Check>& checks, double seconds) {
  // libxml2's writer (ccl already links libxml2 for its topology files) does the escaping.
  size_t failures = 0;
  for (const Check& c : checks) failures += c.passed ? 0 : 1;
  xmlBufferPtr buffer = xmlBufferCreate();
  xmlTextWriterPtr w = xmlNewTextWriterMemory(buffer, 0);
  auto attr = [&](const char* name, const std::string& value) {
    xmlTextWriterWriteAttribute(w, BAD_CAST name, BAD_CAST value.c_str());
  };
  xmlTextWriterSetIndent(w, 1);
  xmlTextWriterStartDocument(w, nullptr, "UTF-8", nullptr);
  xmlTextWriterStartElement(w, BAD_CAST "testsuites");
  attr("name", "ccl-check");
  attr("tests", std::to_string(checks.size()));
  attr("failures", std::to_string(failures));
  attr("time", fixed(seconds, 3));
  xmlTextWriterStartElement(w, BAD_CAST "testsuite");
  attr("name", "ccl-check");
  attr("tests", std::to_string(checks.size()));
  attr("failures", std::to_string(failures));
  attr("errors", "0");
  attr("skipped", "0");
  attr("time", fixed(seconds, 3));
  for (const Check& c : checks) {
    xmlTextWriterStartElement(w, BAD_CAST "testcase");
    attr("classname", "ccl-check");
    attr("name", c.name);
    if (!c.passed) {
      xmlTextWriterStartElement(w, BAD_CAST "failure");
      attr("type", c.code);
      attr("message", c.reason);
      xmlTextWriterEndElement(w);
    }
    xmlTextWriterEndElement(w);
  }
  xmlTextWriterEndDocument(w);  // closes the open elements
  xmlFreeTextWriter(w);         // flushes into the buffer
  std::string out(reinterpret_cast<const char*>(xmlBufferContent(buffer)),
                  static_cast<size_t>(xmlBufferLength(buffer)));
  xmlBufferFree(buffer);
  return out;
}

std::string to_csv(const std::vector<SweepPoint>& sweep) {
  std::ostringstream out;
  out << "collective,bytes,time_us,algbw_gbps,busbw_gbps,runs,correct\n";
  for (const SweepPoint& p : sweep) {
    out << p.collective << "," << p.bytes << "," << fixed(p.time_us, 3) << ","
        << fixed(p.algbw_gbps, 4) << "," << fixed(p.busbw_gbps, 4) << "," << p.runs << ","
        << (p.correct ? "true" : "false") << "\n";
  }
  return out.str();
}

}  // namespace ccl_check
