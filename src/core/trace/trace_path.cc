#include "core/trace/trace_path.h"

#include <unistd.h>

#include <cstring>
#include <mutex>
#include <set>

namespace ccl::trace {

std::string expand_trace_pattern(std::string_view pattern, std::string_view host, long pid,
                                 int rank, std::string_view tags) {
  std::string path;
  bool has_rank = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (pattern[i] != '%' || (next != 'h' && next != 'p' && next != 'r' && next != '%')) {
      path += pattern[i];
      continue;
    }
    ++i;
    if (next == 'h') {
      path += host;
    } else if (next == 'p') {
      path += std::to_string(pid);
    } else if (next == 'r') {
      path += std::to_string(rank);
      has_rank = true;
    } else {
      path += '%';
    }
  }
  std::string inserted = has_rank ? std::string() : std::to_string(rank);
  if (!tags.empty()) {
    if (!inserted.empty()) inserted += '.';
    inserted += tags;
  }
  return inserted.empty() ? path : insert_before_extension(path, inserted);
}

std::string insert_before_extension(std::string_view path, std::string_view tag) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  const size_t dot = path.rfind('.');
  const size_t at = dot != std::string_view::npos && dot > base ? dot : path.size();
  std::string out(path.substr(0, at));
  out += '.';
  out += tag;
  out += path.substr(at);
  return out;
}

std::string communicator_tag(std::string_view comm_name, std::string_view comm_tag) {
  std::string tag;
  for (char c : comm_name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '-';
    tag += plain ? c : '_';
  }
  if (!tag.empty()) tag += '-';
  tag += comm_tag;
  return tag;
}

std::string claim_trace_path(std::string_view pattern, int rank, std::string_view comm_name,
                             std::string_view comm_tag) {
  // Never freed: a communicator destroyed during exit may still claim.
  static std::mutex* mutex = new std::mutex;
  static std::set<std::string>* claimed = new std::set<std::string>;
  static std::string* first_tag = nullptr;

  const std::string host = short_host_name();
  const long pid = static_cast<long>(getpid());
  std::lock_guard lock(*mutex);
  if (first_tag == nullptr) first_tag = new std::string(comm_tag);
  const std::string tag = comm_tag == *first_tag ? "" : communicator_tag(comm_name, comm_tag);
  std::string path = expand_trace_pattern(pattern, host, pid, rank, tag);
  for (int n = 1; claimed->count(path) != 0; ++n) {
    const std::string repeat = "c" + std::to_string(n);
    path =
        expand_trace_pattern(pattern, host, pid, rank, tag.empty() ? repeat : tag + "." + repeat);
  }
  claimed->insert(path);
  return path;
}

std::string short_host_name() {
  char host[256] = "";
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  if (char* dot = strchr(host, '.')) *dot = '\0';
  return host;
}

}  // namespace ccl::trace
