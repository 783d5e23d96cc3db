// The byte format of Optimizer::save_state (optim.hpp), in host byte order:
//   magic "CCLOPTIM", u32 version, u32 length + the optimizer's kind ("lamb"), i64 step count,
//   u64 refs, then per ref a u8 presence and, when present, u64 count, i64 the piece's steps,
//   u32 buffers, and buffers × count floats.
// Self-describing so that a checkpoint loaded into the wrong optimizer, or a file that is not one,
// is refused by name rather than read as floats. Internal to ccl_training.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccl::training::optim_detail {

/// Appends a state blob: the header at construction, then one piece per ref in order.
class BlobWriter {
 public:
  BlobWriter(std::string_view kind, int64_t steps, size_t refs);
  void absent();
  void present(size_t count, int64_t steps, uint32_t buffers, std::span<const float> data);
  std::vector<char> take() { return std::move(bytes_); }

 private:
  void append(const void* data, size_t n);
  template <class T>
  void put(const T& value);
  std::vector<char> bytes_;
};

/// One ref's saved state, as read.
struct SavedPiece {
  bool present = false;
  size_t count = 0;
  int64_t steps = 0;
  uint32_t buffers = 0;
  std::vector<float> data;  // buffers × count
};

/// Reads a whole blob; throws std::invalid_argument "<prefix>load_state: ..." for bytes that are
/// not a blob of this version, truncated, or followed by more bytes.
struct SavedState {
  std::string kind;
  int64_t steps = 0;
  std::vector<SavedPiece> pieces;
};
SavedState read_blob(const char* prefix, std::span<const char> bytes);

}  // namespace ccl::training::optim_detail
