// Writes a trace (trace_events.h) as Chrome / Perfetto JSON, without a JSON library:
//   {"traceEvents":[...], "displayTimeUnit":"ns",
//    "otherData":{"ccl_version":"0.1.0", "rank":R, "nranks":N, "dropped_events":D, ...}}
// Track per rank: pid = the rank, tid 0; metadata events name it "rank R (host H)" and sort it by
// rank. Operations and their rounds are complete events ("ph":"X") on that track, the rounds
// inside their operation's times; ts and dur are microseconds of the system clock, with three
// decimals (nanoseconds), so that the files of several ranks line up in one viewer.
#pragma once

#include <string>
#include <string_view>

#include "core/trace/trace_events.h"

namespace ccl::trace {

// Appends `text` as a JSON string, quoted: '"', '\\' and control characters escaped, bytes that
// are not UTF-8 replaced by U+FFFD, so that any name makes valid JSON.
void append_json_string(std::string& out, std::string_view text);

// The whole file, for tests and small traces.
std::string format_trace(const TraceData& data);

// Writes format_trace(data) to `path` (replacing it), in pieces (a large trace is never held
// twice). Returns "" on success, else the errno text of what failed.
std::string write_trace_file(const std::string& path, const TraceData& data);

}  // namespace ccl::trace
