// Helpers for the transport tests: message patterns, checking sinks, a progress loop, a
// cross-process FileStore, and /dev/shm inspection. Rank bodies report failures by throwing
// (require()), so the same body runs in a thread or in a forked child.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "core/bootstrap/store.h"
#include "transport/transport.h"

namespace ccl::test {

// Throws std::runtime_error(message) unless `condition`.
void require(bool condition, const std::string& message);
// Throws std::runtime_error(message). For checks in loops over every element: `if (!ok) fail(...)`
// builds the message only on failure (require's argument is built on every call, which made a
// byte-wise check of a 512 KiB buffer take seconds under ASan).
[[noreturn]] void fail(const std::string& message);

// A unique communicator tag per call: "t<pid>x<counter>".
std::string unique_tag();

// Names in /dev/shm that start with "ccl-<tag>-".
std::vector<std::string> shm_files_of(const std::string& tag);

// The byte at `i` of message `index` from `src` to `dst`: no short period, so a piece landing at
// a wrong offset is caught.
std::byte pattern_byte(int src, int dst, int index, size_t i);
void fill_pattern(std::byte* out, size_t bytes, int src, int dst, int index);
// Empty if `data` equals bytes [offset, offset + bytes) of the message, else a description of
// the first difference.
std::string check_pattern(const std::byte* data, size_t bytes, int src, int dst, int index,
                          size_t offset = 0);

// Checks the piece rules of transport.h: in order, contiguous, offsets multiples of kPieceAlign,
// lengths multiples of it except the last, nothing past the end.
class PieceChecker {
 public:
  explicit PieceChecker(size_t total) : total_(total) {}
  void piece(size_t offset, size_t length);
  // Empty when every byte arrived exactly once and every piece was well formed.
  std::string result() const;
  size_t pieces() const { return pieces_; }
  bool ok() const { return error_.empty(); }  // no malformed piece so far

 private:
  size_t total_;
  size_t next_ = 0;
  size_t pieces_ = 0;
  std::string error_;
};

// Copies into `destination` (any alignment).
class CopySink : public transport::RecvSink {
 public:
  CopySink(std::byte* destination, size_t bytes) : destination_(destination), checker_(bytes) {}
  void consume(const std::byte* piece, size_t offset, size_t length) override;
  const PieceChecker& checker() const { return checker_; }

 private:
  std::byte* destination_;
  PieceChecker checker_;
};

// Compares each piece with the expected pattern in place, copying nothing.
class VerifySink : public transport::RecvSink {
 public:
  VerifySink(size_t bytes, int src, int dst, int index)
      : checker_(bytes), src_(src), dst_(dst), index_(index) {}
  void consume(const std::byte* piece, size_t offset, size_t length) override;
  std::string result() const { return error_.empty() ? checker_.result() : error_; }

 private:
  PieceChecker checker_;
  int src_, dst_, index_;
  std::string error_;
};

// Progresses `connections` until `done()`, sleeping in transport.wait() when nothing moves.
// Throws Timeout at the deadline. Returns the number of wait() calls.
size_t drive(transport::Transport& transport, std::span<transport::Connection* const> connections,
             const std::function<bool()>& done, Deadline deadline,
             std::chrono::microseconds wait_slice = std::chrono::milliseconds(100));

// Every rank sends message m (sizes[m] bytes, from unaligned buffers) to every other rank and
// receives the same from each, all posted at once; half the receives copy into unaligned buffers,
// half verify in place. Throws on any wrong byte or piece.
void exchange_matrix(transport::Transport& transport,
                     const std::vector<transport::Connection*>& by_peer, int rank, int nranks,
                     const std::vector<size_t>& sizes, Deadline deadline,
                     std::chrono::microseconds wait_slice = std::chrono::milliseconds(100));

// A Store between processes: one file per key in a private directory (test use only; polls).
class FileStore : public Store {
 public:
  FileStore();  // makes a fresh directory under /tmp
  ~FileStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;
  // Only the process that created it removes the directory.
  const std::string& directory() const { return directory_; }

 private:
  std::string path(const std::string& key) const;
  std::string directory_;
  int creator_pid_;
};

// A barrier for threads with a deadline (so a failed rank cannot hang the others forever).
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int count) : count_(count) {}
  void arrive_and_wait(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int count_;
  int arrived_ = 0;
  int generation_ = 0;
};

}  // namespace ccl::test
