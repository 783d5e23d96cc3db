// How fault_check judges one failed call (the rules README.md lists), kept apart from the loop
// that produces it. Every verdict is printed as one line that fault_trials.sh parses.
#pragma once

#include <cstdint>
#include <string>

#include "ccl/ccl.h"

namespace ccl::fault {

enum class Mode { kKill, kKillIdle, kKillStream, kStop, kLinkDown };

// "kill", "kill-idle", "kill-stream", "stop", "link-down".
bool parse_mode(const char* text, Mode* mode);

struct Limits {
  long max_latency_ms = 2000;  // kill modes: fault -> error; stop, link-down: beyond the timeout
  long timeout_ms = 0;         // stop, link-down: the CCL_TIMEOUT the ranks run with
  long max_abort_ms = 1000;    // cclCommAbort after the failure
};

// What a rank saw when a call failed.
struct Failure {
  int rank = 0;
  uint64_t iter = 0;
  const char* op = "";
  cclResult_t result = cclSuccess;
  std::string message;   // cclGetLastError
  int64_t fail_ms = 0;   // CLOCK_REALTIME
  bool stamped = false;  // the victim's stamp file existed
  int64_t stamp_ms = 0;
  int64_t call_start_ms = 0;             // kill-idle: first call after the idle sleep (0: none yet)
  cclResult_t async_query = cclSuccess;  // what cclCommGetAsyncError returned...
  cclResult_t async_error = cclSuccess;  // ...and what it reported
  cclResult_t abort_result = cclSuccess;
  int64_t abort_ms = 0;
};

// "cclRemoteError", ...
const char* result_name(cclResult_t result);

// Milliseconds from the fault (kill-idle: from the later of the kill and the call's start) to
// the failure; only meaningful when f.stamped.
int64_t fault_latency_ms(Mode mode, const Failure& f);

// True when `message` names `rank` after the word "rank": "rank 2", "rank(s) 0,2",
// "ranks [1, 2]".
bool names_rank(const std::string& message, int rank);

// FAULT rank R result NAME (string) latency_ms L iter I op OP: message
void print_fault_line(Mode mode, const Failure& f);

// Prints "SURVIVOR OK rank R (...)" or "SURVIVOR BAD rank R: reasons"; true when OK.
bool judge_survivor(Mode mode, int victim, const Limits& limits, const Failure& f);

// stop mode, the victim after SIGCONT: an error (cclRemoteError or cclTimeout) is fine; prints
// "VICTIM rank V after SIGCONT: ..." and "VICTIM OK" or "VICTIM BAD: reasons".
bool judge_resumed_victim(const Limits& limits, const Failure& f);

}  // namespace ccl::fault
