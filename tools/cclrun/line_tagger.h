// --tag-output: turns one rank's stdout or stderr stream into lines prefixed "[R] " written to
// cclrun's own stdout or stderr. Whole lines are written with one write(), so lines of different
// ranks never interleave mid-line (below PIPE_BUF, even with other writers on the same pipe).
#pragma once

#include <cstddef>
#include <string>

namespace ccl::cclrun {

class LineTagger {
 public:
  LineTagger(int rank, int out_fd);

  void feed(const char* data, size_t bytes);
  // End of stream: a last line without a newline is written with one added.
  void finish();

 private:
  void emit(const char* data, size_t bytes, bool ends_line);

  std::string prefix_;
  int out_fd_;
  std::string pending_;        // a partial line
  bool at_line_start_ = true;  // false after a long partial line was flushed without '\n'
};

// write() all of it, retrying on EINTR/EAGAIN; gives up silently on other errors (a closed
// stdout must not stop cclrun from supervising the ranks).
void write_fully(int fd, const char* data, size_t bytes);

}  // namespace ccl::cclrun
