#include "fault_verdict.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

namespace ccl::fault {

bool parse_mode(const char* text, Mode* mode) {
  static const struct {
    const char* name;
    Mode mode;
  } kModes[] = {{"kill", Mode::kKill},
                {"kill-idle", Mode::kKillIdle},
                {"kill-stream", Mode::kKillStream},
                {"stop", Mode::kStop},
                {"link-down", Mode::kLinkDown}};
  for (const auto& m : kModes) {
    if (strcmp(text, m.name) == 0) {
      *mode = m.mode;
      return true;
    }
  }
  return false;
}

const char* result_name(cclResult_t result) {
  switch (result) {
    case cclSuccess:
      return "cclSuccess";
    case cclUnhandledCudaError:
      return "cclUnhandledCudaError";
    case cclSystemError:
      return "cclSystemError";
    case cclInternalError:
      return "cclInternalError";
    case cclInvalidArgument:
      return "cclInvalidArgument";
    case cclInvalidUsage:
      return "cclInvalidUsage";
    case cclRemoteError:
      return "cclRemoteError";
    case cclInProgress:
      return "cclInProgress";
    case cclTimeout:
      return "cclTimeout";
    default:
      return "unknown";
  }
}

int64_t fault_latency_ms(Mode mode, const Failure& f) {
  int64_t from = f.stamp_ms;
  if (mode == Mode::kKillIdle) from = std::max(from, f.call_start_ms);
  return f.fail_ms - from;
}

bool names_rank(const std::string& message, int rank) {
  const std::string want = std::to_string(rank);
  for (size_t at = message.find("rank"); at != std::string::npos;
       at = message.find("rank", at + 1)) {
    size_t i = at + 4;
    if (message.compare(i, 3, "(s)") == 0)
      i += 3;
    else if (i < message.size() && message[i] == 's')
      ++i;
    // A list of numbers separated by spaces, commas or brackets.
    while (i < message.size()) {
      const char c = message[i];
      if (c == ' ' || c == ',' || c == '[' || c == ':') {
        if (c == ':' && i > at + 4 && isdigit(static_cast<unsigned char>(message[i - 1]))) break;
        ++i;
        continue;
      }
      if (!isdigit(static_cast<unsigned char>(c))) break;
      size_t end = i;
      while (end < message.size() && isdigit(static_cast<unsigned char>(message[end]))) ++end;
      if (message.compare(i, end - i, want) == 0 && end - i == want.size()) return true;
      i = end;
    }
  }
  return false;
}

void print_fault_line(Mode mode, const Failure& f) {
  char latency[32] = "none";
  if (f.stamped)
    snprintf(latency, sizeof(latency), "%lld", static_cast<long long>(fault_latency_ms(mode, f)));
  printf("FAULT rank %d result %s (%s) latency_ms %s iter %llu op %s: %s\n", f.rank,
         result_name(f.result), cclGetErrorString(f.result), latency,
         static_cast<unsigned long long>(f.iter), f.op, f.message.c_str());
  if (mode == Mode::kKillIdle && f.stamped && f.stamp_ms > f.call_start_ms) {
    printf("NOTE rank %d: the kill landed %lld ms after the call started, not while idle\n", f.rank,
           static_cast<long long>(f.stamp_ms - f.call_start_ms));
  }
}

namespace {

void add(std::string* why, const std::string& text) {
  if (!why->empty()) *why += "; ";
  *why += text;
}

// What every failure must also satisfy: the error stays visible through cclCommGetAsyncError,
// and abort returns promptly.
void check_aftermath(const Limits& limits, const Failure& f, std::string* why) {
  if (f.async_query != cclSuccess) {
    add(why, std::string("cclCommGetAsyncError itself failed: ") + result_name(f.async_query));
  } else if (f.async_error == cclSuccess || f.async_error == cclInProgress) {
    add(why, std::string("cclCommGetAsyncError reports ") + result_name(f.async_error) +
                 " after the failure");
  }
  if (f.abort_result != cclSuccess) {
    add(why, std::string("cclCommAbort returned ") + result_name(f.abort_result));
  }
  if (f.abort_ms > limits.max_abort_ms) {
    add(why, "cclCommAbort took " + std::to_string(f.abort_ms) + " ms > " +
                 std::to_string(limits.max_abort_ms));
  }
}

}  // namespace

bool judge_survivor(Mode mode, int victim, const Limits& limits, const Failure& f) {
  std::string why;
  if (!f.stamped) {
    add(&why, "the call failed before the fault was injected (no stamp)");
  } else {
    const int64_t latency = fault_latency_ms(mode, f);
    if (mode == Mode::kStop) {
      if (f.result != cclTimeout)
        add(&why, std::string("result ") + result_name(f.result) + ", expected cclTimeout");
      if (!names_rank(f.message, victim)) {
        add(&why, "the message does not name the stopped rank " + std::to_string(victim));
      }
      const long bound = limits.timeout_ms + limits.max_latency_ms;
      if (latency > bound) {
        add(&why, "latency " + std::to_string(latency) + " ms > timeout + " +
                      std::to_string(limits.max_latency_ms) + " = " + std::to_string(bound));
      }
    } else {
      // Kill modes: within max_latency_ms. A link that went down may only be noticed at the
      // timeout: within timeout + max_latency_ms then.
      const long bound = mode == Mode::kLinkDown ? limits.timeout_ms + limits.max_latency_ms
                                                 : limits.max_latency_ms;
      if (f.result != cclRemoteError && f.result != cclTimeout) {
        add(&why, std::string("result ") + result_name(f.result) +
                      ", expected cclRemoteError or cclTimeout");
      }
      if (latency > bound) {
        add(&why, "latency " + std::to_string(latency) + " ms > " + std::to_string(bound));
      }
    }
    if (latency < 0) {
      add(&why, "failed " + std::to_string(-latency) + " ms before the fault");
    }
  }
  check_aftermath(limits, f, &why);
  if (why.empty()) {
    printf("SURVIVOR OK rank %d (async %s, abort %lld ms)\n", f.rank, result_name(f.async_error),
           static_cast<long long>(f.abort_ms));
    return true;
  }
  printf("SURVIVOR BAD rank %d: %s\n", f.rank, why.c_str());
  return false;
}

bool judge_resumed_victim(const Limits& limits, const Failure& f) {
  printf("VICTIM rank %d after SIGCONT: result %s iter %llu op %s: %s\n", f.rank,
         result_name(f.result), static_cast<unsigned long long>(f.iter), f.op, f.message.c_str());
  std::string why;
  if (f.result != cclRemoteError && f.result != cclTimeout) {
    add(&why,
        std::string("result ") + result_name(f.result) + ", expected cclRemoteError or cclTimeout");
  }
  check_aftermath(limits, f, &why);
  if (why.empty()) {
    printf("VICTIM OK rank %d\n", f.rank);
    return true;
  }
  printf("VICTIM BAD rank %d: %s\n", f.rank, why.c_str());
  return false;
}

}  // namespace ccl::fault
