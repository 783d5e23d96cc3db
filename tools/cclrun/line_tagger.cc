#include "line_tagger.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ccl::cclrun {

namespace {
// A rank printing megabytes without a newline must not make cclrun buffer all of it.
constexpr size_t kMaxPending = 64 * 1024;
}  // namespace

void write_fully(int fd, const char* data, size_t bytes) {
  while (bytes > 0) {
    ssize_t n = write(fd, data, bytes);
    if (n > 0) {
      data += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
    } else {
      return;
    }
  }
}

LineTagger::LineTagger(int rank, int out_fd)
    : prefix_("[" + std::to_string(rank) + "] "), out_fd_(out_fd) {}

void LineTagger::emit(const char* data, size_t bytes, bool ends_line) {
  std::string out;
  out.reserve(prefix_.size() + bytes + 1);
  if (at_line_start_) out += prefix_;
  out.append(data, bytes);
  if (ends_line) out += '\n';
  write_fully(out_fd_, out.data(), out.size());
  at_line_start_ = ends_line;
}

void LineTagger::feed(const char* data, size_t bytes) {
  const char* end = data + bytes;
  while (data < end) {
    const char* nl = static_cast<const char*>(memchr(data, '\n', end - data));
    if (nl == nullptr) {
      pending_.append(data, end - data);
      if (pending_.size() >= kMaxPending) {
        emit(pending_.data(), pending_.size(), false);
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      emit(data, nl - data, true);
    } else {
      pending_.append(data, nl - data);
      emit(pending_.data(), pending_.size(), true);
      pending_.clear();
    }
    data = nl + 1;
  }
}

void LineTagger::finish() {
  if (!pending_.empty()) {
    emit(pending_.data(), pending_.size(), true);
    pending_.clear();
  } else if (!at_line_start_) {
    emit("", 0, true);
  }
}

}  // namespace ccl::cclrun
