#include "base/replace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <system_error>

namespace ccl {

std::string replace_file(const std::string& path, std::string_view text) {
  static std::atomic<unsigned> writes{0};
  const std::string tmp =
      path + "." + std::to_string(getpid()) + "-" + std::to_string(writes.fetch_add(1)) + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + tmp + ": " + std::system_category().message(errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::system_category().message(n < 0 ? errno : EIO);
      close(fd);
      unlink(tmp.c_str());
      return "cannot write " + tmp + ": " + why;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::system_category().message(errno);
    unlink(tmp.c_str());
    return "cannot replace " + path + ": " + why;
  }
  return "";
}

}  // namespace ccl
