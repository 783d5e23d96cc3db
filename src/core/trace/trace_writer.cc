#include "core/trace/trace_writer.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>

#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "ccl/ccl.h"

namespace ccl::trace {

namespace {

constexpr size_t kFlushBytes = 1 << 20;

// The length of the UTF-8 sequence at s[0..n), or 0 if it is not one (overlong forms,
// surrogates and values above U+10FFFF included).
size_t utf8_length(const unsigned char* s, size_t n) {
  const unsigned char c = s[0];
  size_t len = 0;
  uint32_t min = 0, value = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2, min = 0x80, value = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, min = 0x800, value = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, min = 0x10000, value = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    value = (value << 6) | (s[i] & 0x3f);
  }
  if (value < min || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) return 0;
  return len;
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  const int n = snprintf(buf, sizeof(buf), "%" PRId64, v);
  out.append(buf, static_cast<size_t>(n));
}

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  const int n = snprintf(buf, sizeof(buf), "%" PRIu64, v);
  out.append(buf, static_cast<size_t>(n));
}

// Nanoseconds as microseconds with three decimals, exactly (no floating point).
void append_us(std::string& out, int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  char buf[32];
  const int n =
      snprintf(buf, sizeof(buf), "%" PRId64 ".%03d", ns / 1000, static_cast<int>(ns % 1000));
  out.append(buf, static_cast<size_t>(n));
}

// `"key":` after a comma unless it is the first of its object.
void key(std::string& out, const char* name, bool first = false) {
  if (!first) out += ',';
  out += '"';
  out += name;
  out += "\":";
}

void metadata(std::string& out, const char* name, int pid, const char* arg, const char* text,
              int64_t number) {
  out += "{\"name\":\"";
  out += name;
  out += "\",\"ph\":\"M\",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":0,\"args\":{";
  key(out, arg, true);
  if (text != nullptr)
    append_json_string(out, text);
  else
    append_int(out, number);
  out += "}}";
}

// The common head of a complete event, up to and including "args":{
void slice_head(std::string& out, std::string_view name, const char* category, int pid,
                int64_t start_ns, int64_t end_ns, int64_t offset_ns) {
  out += "{\"name\":";
  append_json_string(out, name);
  out += ",\"cat\":\"";
  out += category;
  out += "\",\"ph\":\"X\",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":0,\"ts\":";
  append_us(out, start_ns + offset_ns);
  out += ",\"dur\":";
  append_us(out, end_ns > start_ns ? end_ns - start_ns : 0);
  out += ",\"args\":{";
}

void op_event(std::string& out, const TraceData& d, const OpEvent& e) {
  slice_head(out, e.name, "op", d.rank, e.start_ns, e.end_ns, d.clock_offset_ns);
  key(out, "seq", true);
  append_uint(out, e.seq);
  key(out, "bytes");
  append_uint(out, e.bytes);
  key(out, "count");
  append_uint(out, e.count);
  if (e.datatype >= 0) {
    key(out, "datatype");
    append_json_string(out, reduce::datatype_name(static_cast<cclDataType_t>(e.datatype)));
  }
  if (e.op >= 0) {
    key(out, "op");
    append_json_string(
        out, e.op < cclNumOps ? reduce::op_name(static_cast<cclRedOp_t>(e.op)) : "premulsum");
  }
  if (e.root >= 0) {
    key(out, "root");
    append_int(out, e.root);
  }
  if (e.peer >= 0) {
    key(out, "peer");
    append_int(out, e.peer);
  }
  if (e.algorithm != nullptr) {
    key(out, "algorithm");
    append_json_string(out, e.algorithm);
  }
  if (e.protocol != nullptr) {
    key(out, "protocol");
    append_json_string(out, e.protocol);
  }
  key(out, "comm");
  append_json_string(out, d.comm_name);
  key(out, "result");
  append_json_string(out, result_name(e.result));
  out += "}}";
}

void round_event(std::string& out, const TraceData& d, const RoundEvent& e) {
  const std::string name = "round " + std::to_string(e.index);
  slice_head(out, name, "round", d.rank, e.start_ns, e.end_ns, d.clock_offset_ns);
  key(out, "bytes_sent", true);
  append_uint(out, e.bytes_sent);
  key(out, "bytes_received");
  append_uint(out, e.bytes_received);
  key(out, "peers");
  out += '[';
  for (uint32_t i = 0; i < e.npeers; ++i) {
    if (i > 0) out += ',';
    append_int(out, d.peers[e.peers_begin + i]);
  }
  out += ']';
  if (!e.completed) {
    key(out, "completed");
    out += "false";
  }
  out += "}}";
}

// Formats `d` into `out`, handing it to `flush` (which empties it) whenever it grows large.
void format(const TraceData& d, std::string& out, const std::function<void(std::string&)>& flush) {
  out += "{\"traceEvents\":[\n";
  const std::string process = "rank " + std::to_string(d.rank) + " (host " + d.host + ")";
  metadata(out, "process_name", d.rank, "name", process.c_str(), 0);
  out += ",\n";
  metadata(out, "process_sort_index", d.rank, "sort_index", nullptr, d.rank);
  out += ",\n";
  const std::string thread =
      d.comm_name.empty() ? std::string("operations") : "operations (comm " + d.comm_name + ")";
  metadata(out, "thread_name", d.rank, "name", thread.c_str(), 0);
  // Operations and rounds merged by start time: each operation before its rounds.
  size_t o = 0, r = 0;
  while (o < d.ops.size() || r < d.rounds.size()) {
    out += ",\n";
    if (r == d.rounds.size() || (o < d.ops.size() && d.ops[o].start_ns <= d.rounds[r].start_ns)) {
      op_event(out, d, d.ops[o++]);
    } else {
      round_event(out, d, d.rounds[r++]);
    }
    if (out.size() >= kFlushBytes) flush(out);
  }
  out += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{";
  key(out, "ccl_version", true);
  append_json_string(out, std::to_string(CCL_MAJOR) + "." + std::to_string(CCL_MINOR) + "." +
                              std::to_string(CCL_PATCH));
  key(out, "rank");
  append_int(out, d.rank);
  key(out, "nranks");
  append_int(out, d.nranks);
  key(out, "dropped_events");
  append_uint(out, d.dropped);
  key(out, "comm");
  append_json_string(out, d.comm_name);
  key(out, "host");
  append_json_string(out, d.host);
  key(out, "clock");
  append_json_string(out, "system_clock");
  out += "}}\n";
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const size_t len = utf8_length(s + i, n - i); len != 0) {
      out.append(text.data() + i, len);
      i += len;
      continue;
    } else {
      out += "\\ufffd";
    }
    ++i;
  }
  out += '"';
}

std::string format_trace(const TraceData& data) {
  std::string out;
  format(data, out, [](std::string&) {});
  return out;
}

std::string write_trace_file(const std::string& path, const TraceData& data) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return strerror(errno);
  int error = 0;
  auto flush = [&](std::string& text) {
    if (error == 0 && fwrite(text.data(), 1, text.size(), f) != text.size()) {
      error = errno != 0 ? errno : EIO;
    }
    text.clear();
  };
  std::string out;
  out.reserve(kFlushBytes + 4096);
  format(data, out, flush);
  flush(out);
  if (fclose(f) != 0 && error == 0) error = errno != 0 ? errno : EIO;
  return error == 0 ? std::string() : std::string(strerror(error));
}

}  // namespace ccl::trace
