#include "explain.h"

#include <algorithm>
#include <map>
#include <utility>

#include "text.h"

namespace ccl::sim {

namespace {

std::string size_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) {
    return std::to_string(bytes >> 30) + " GiB";
  }
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

const char* local_work_name(OpKind kind) {
  switch (kind) {
    case OpKind::Copy:
      return "copy";
    case OpKind::Reduce:
      return "final pass";
    case OpKind::Recv:
      return "copy out of arrived bytes";
    case OpKind::RecvReduce:
      return "reduction of arrived bytes";
    case OpKind::Delay:
      return "the next call's fixed overhead";
    case OpKind::Send:
      break;
  }
  return "send";
}

std::string held_by(const PathStep& step, const Network& network) {
  const auto& res = network.resources();
  if (step.bottleneck < 0 || size_t(step.bottleneck) >= res.size()) return "-";
  return res[size_t(step.bottleneck)].name;
}

std::string step_line(size_t index, const PathStep& step, const Network& network) {
  std::string what;
  if (step.kind == OpKind::Send) {
    what = printf_string("send %s to rank %d over %s", size_text(step.bytes).c_str(), step.peer,
                         step.link);
  } else if (step.kind == OpKind::Delay) {
    what = local_work_name(step.kind);
  } else {
    what = printf_string("%s of %s", local_work_name(step.kind), size_text(step.bytes).c_str());
  }
  return printf_string("#  %6zu %6d %5u  %-40s %12.3f %12.3f  %s\n", index + 1, step.rank,
                       step.round, what.c_str(), step.begin_us, step.end_us,
                       held_by(step, network).c_str());
}

}  // namespace

std::string resource_kind(const std::string& name) {
  // Drop the first number and one of the spaces around it: "rank 12 tx" -> "rank tx".
  constexpr const char* kDigits = "0123456789";
  size_t begin = name.find_first_of(kDigits);
  if (begin == std::string::npos) return name;
  const size_t end = std::min(name.find_first_not_of(kDigits, begin), name.size());
  if (begin > 0 && name[begin - 1] == ' ' && end < name.size() && name[end] == ' ') --begin;
  return name.substr(0, begin) + name.substr(end);
}

std::string describe_path(const SimResult& result, const Network& network, size_t max_steps) {
  const auto& path = result.critical_path;
  if (path.empty()) {
    return "# critical path: not traced (the run has too many steps to trace)\n";
  }
  // Where the time went. The steps touch (each begins where the one it waited for ended), so
  // the parts add up to the time from the first step's beginning to the last one's end.
  const double start = path.front().begin_us;
  std::map<std::string, std::pair<double, int>> parts;  // what -> (us, steps)
  auto add = [&](const std::string& what, double us) {
    auto& part = parts[what];
    part.first += us;
    ++part.second;
  };
  for (const PathStep& step : path) {
    const double span = step.end_us - step.begin_us;
    if (step.kind == OpKind::Send) {
      add(std::string("latency (") + step.link + ")", step.latency_us);
      add("bytes held by " + resource_kind(held_by(step, network)), span - step.latency_us);
    } else if (step.kind == OpKind::Delay) {
      add("later calls' fixed overhead", span);
    } else {
      add(std::string(local_work_name(step.kind)) + " on " + resource_kind(held_by(step, network)),
          span);
    }
  }
  std::string out = printf_string(
      "# critical path: %zu steps, ends on rank %d at %.3f us (one chain of steps, each waiting "
      "for the one before)\n",
      path.size(), result.last_rank, result.time_us);
  const double total = result.time_us > 0 ? result.time_us : 1;
  out += printf_string("#   %-44s %12.3f us %5.1f%%\n", "start (the call's fixed overhead)", start,
                       100 * start / total);
  for (const auto& [what, part] : parts) {
    out += printf_string("#   %-44s %12.3f us %5.1f%%  in %d step%s\n", what.c_str(), part.first,
                         100 * part.first / total, part.second, part.second == 1 ? "" : "s");
  }
  out += printf_string("#  %6s %6s %5s  %-40s %12s %12s  %s\n", "step", "rank", "round", "what",
                       "begin_us", "end_us", "held by");
  const size_t half = max_steps / 2;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path.size() > max_steps && i == half) {
      out += printf_string("#  ... %zu steps ...\n", path.size() - 2 * half);
      i = path.size() - half;
      if (i >= path.size()) break;  // max_steps 0 or 1: no last half to print
    }
    out += step_line(i, path[i], network);
  }
  return out;
}

}  // namespace ccl::sim
