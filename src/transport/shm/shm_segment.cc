#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "base/log.h"

namespace ccl::transport::shm {

namespace {

constexpr size_t kMaxTagChars = 160;  // NAME_MAX is 255; keep the rank and some margin

bool allowed(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

std::byte* map(int fd, size_t offset, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                 static_cast<off_t>(offset));
  if (p == MAP_FAILED) throw_system_error(errno, "shm: mmap %s (%zu bytes)", name.c_str(), bytes);
  return static_cast<std::byte*>(p);
}

}  // namespace

std::string segment_name(const std::string& comm_tag, int rank) {
  std::string tag;
  for (char c : comm_tag) tag += allowed(c) ? c : '_';
  if (tag.size() > kMaxTagChars) {
    uint64_t hash = 1469598103934665603ull;  // FNV-1a of the full tag keeps long tags distinct
    for (unsigned char c : comm_tag) hash = (hash ^ c) * 1099511628211ull;
    char hex[17];
    snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
    tag = tag.substr(0, kMaxTagChars - 17) + "_" + hex;
  }
  return "/ccl-" + tag + "-" + std::to_string(rank);
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw_system_error(errno, "shm: cannot create segment %s", name.c_str());
  ShmSegment segment;
  segment.name_ = name;
  segment.linked_ = true;  // from here on, the destructor removes the name
  // posix_fallocate, not just ftruncate: a /dev/shm too small for the rings must fail here with
  // a clear error, not with SIGBUS at the first transfer that touches a missing page.
  int err = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (err == 0) err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    throw_system_error(err,
                       "shm: cannot allocate %zu bytes for %s (is /dev/shm too small? lower "
                       "CCL_BUFFSIZE or set CCL_SHM_DISABLE=1)",
                       bytes, name.c_str());
  }
  try {
    segment.base_ = map(fd, 0, bytes, name);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  segment.size_ = bytes;
  CCL_TRACE(kShm, "shm: created %s (%zu bytes)", name.c_str(), bytes);
  return segment;
}

std::vector<ShmSegment> ShmSegment::open(const std::string& name, size_t total_bytes,
                                         const std::vector<Window>& windows) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throw_system_error(errno, "shm: cannot open peer segment %s", name.c_str());
  std::vector<ShmSegment> result;
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  try {
    struct stat st;
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != total_bytes) {
      throw_error(cclRemoteError, "shm: peer segment %s does not have the announced %zu bytes",
                  name.c_str(), total_bytes);
    }
    for (const Window& w : windows) {
      if (w.offset % page != 0 || w.offset + w.bytes > total_bytes || w.bytes == 0) {
        throw_error(cclInternalError, "shm: bad window [%zu, +%zu) of %s", w.offset, w.bytes,
                    name.c_str());
      }
      ShmSegment segment;
      segment.name_ = name;
      segment.base_ = map(fd, w.offset, w.bytes, name);
      segment.size_ = w.bytes;
      result.push_back(std::move(segment));
    }
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return result;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      linked_(std::exchange(other.linked_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() { release(); }

void unlink_name(const std::string& name) {
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
    CCL_WARN(kShm, "shm: cannot remove %s: %s", name.c_str(), strerror(errno));
  }
}

void ShmSegment::unlink() {
  if (!linked_) return;
  linked_ = false;
  unlink_name(name_);
}

void ShmSegment::release() {
  unlink();
  if (base_ != nullptr) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

}  // namespace ccl::transport::shm
