// A POSIX shared-memory segment (/dev/shm) mapped into this process, owned RAII-style: the
// mapping goes with the object, and the creator's name is removed at the latest in the
// destructor, so an exception or an early return never leaves a file in /dev/shm.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ccl::transport::shm {

// "/ccl-<comm_tag>-<rank>", with characters shm_open does not allow in names replaced by '_'
// (and an over-long tag shortened to a prefix plus a hash).
std::string segment_name(const std::string& comm_tag, int rank);

// shm_unlink, ignoring a name that is already gone.
void unlink_name(const std::string& name);

class ShmSegment {
 public:
  // O_CREAT | O_EXCL, sized and mapped; pages are populated now rather than on the first
  // transfer. The caller unlinks it once every peer has mapped it.
  static ShmSegment create(const std::string& name, size_t bytes);
  // Maps windows of an existing segment (a peer's) of `total_bytes`, one object per window, so
  // that a rank maps only the parts of a peer's segment it uses. Offsets are page aligned.
  struct Window {
    size_t offset = 0;
    size_t bytes = 0;
  };
  static std::vector<ShmSegment> open(const std::string& name, size_t total_bytes,
                                      const std::vector<Window>& windows);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // Removes the name (the creator's job; idempotent). The mapping stays valid.
  void unlink();

  std::byte* base() const { return base_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void release();

  std::string name_;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;  // we created it and have not removed its name yet
};

}  // namespace ccl::transport::shm
