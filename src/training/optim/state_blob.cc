// The state blob's writer and reader (state_blob.h).
#include "optim/state_blob.h"

#include <cstring>
#include <stdexcept>

namespace ccl::training::optim_detail {

namespace {

constexpr char kMagic[8] = {'C', 'C', 'L', 'O', 'P', 'T', 'I', 'M'};
constexpr uint32_t kVersion = 1;
// A kind longer than this is not a blob of ours (and must not size an allocation).
constexpr uint32_t kMaxKind = 64;

// Reads fixed-size fields in order; every read checks what is left, so a truncated or corrupt
// blob throws instead of reading past its end.
class Cursor {
 public:
  Cursor(const char* prefix, std::span<const char> bytes) : prefix_(prefix), bytes_(bytes) {}

  template <class T>
  T get(const char* what) {
    T value;
    need(sizeof(T), what);
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  void get_bytes(void* out, size_t n, const char* what) {
    need(n, what);
    if (n == 0) return;  // `out` may be null then
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }
  size_t left() const { return bytes_.size() - at_; }
  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument(std::string(prefix_) + "load_state: " + why);
  }

 private:
  void need(size_t n, const char* what) const {
    if (n > left()) {
      fail("the state is truncated: " + std::string(what) + " needs " + std::to_string(n) +
           " bytes at byte " + std::to_string(at_) + ", " + std::to_string(left()) + " left");
    }
  }
  const char* prefix_;
  std::span<const char> bytes_;
  size_t at_ = 0;
};

}  // namespace

BlobWriter::BlobWriter(std::string_view kind, int64_t steps, size_t refs) {
  append(kMagic, sizeof(kMagic));
  put(kVersion);
  put(static_cast<uint32_t>(kind.size()));
  append(kind.data(), kind.size());
  put(steps);
  put(static_cast<uint64_t>(refs));
}

// By resize and memcpy: GCC 12 takes vector::insert of a few bytes for an overflow
// (-Wstringop-overflow, a false positive).
void BlobWriter::append(const void* data, size_t n) {
  if (n == 0) return;  // `data` may be null then
  const size_t at = bytes_.size();
  bytes_.resize(at + n);
  std::memcpy(bytes_.data() + at, data, n);
}

template <class T>
void BlobWriter::put(const T& value) {
  append(&value, sizeof(T));
}

void BlobWriter::absent() { put(uint8_t{0}); }

void BlobWriter::present(size_t count, int64_t steps, uint32_t buffers,
                         std::span<const float> data) {
  put(uint8_t{1});
  put(static_cast<uint64_t>(count));
  put(steps);
  put(buffers);
  append(data.data(), data.size_bytes());
}

SavedState read_blob(const char* prefix, std::span<const char> bytes) {
  Cursor in(prefix, bytes);
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    in.fail("the " + std::to_string(bytes.size()) +
            " bytes are not an optimizer state (no CCLOPTIM magic word)");
  }
  char magic[sizeof(kMagic)];
  in.get_bytes(magic, sizeof(magic), "the magic word");
  const auto version = in.get<uint32_t>("the version");
  if (version != kVersion) {
    in.fail("the state is version " + std::to_string(version) + ", this build reads version " +
            std::to_string(kVersion));
  }
  SavedState state;
  const auto kind_size = in.get<uint32_t>("the kind's length");
  if (kind_size > kMaxKind)
    in.fail("the kind's length " + std::to_string(kind_size) + " is corrupt");
  state.kind.resize(kind_size);
  in.get_bytes(state.kind.data(), kind_size, "the kind");
  state.steps = in.get<int64_t>("the step count");
  const auto refs = in.get<uint64_t>("the count of refs");
  // Each ref takes at least its presence byte: more refs than bytes left is corrupt (and must
  // not size the reservation).
  if (refs > in.left()) {
    in.fail("the state is truncated: it claims " + std::to_string(refs) + " refs in " +
            std::to_string(in.left()) + " bytes");
  }
  state.pieces.resize(refs);
  for (uint64_t i = 0; i < refs; ++i) {
    SavedPiece& piece = state.pieces[i];
    piece.present = in.get<uint8_t>("a ref's presence") != 0;
    if (!piece.present) continue;
    piece.count = in.get<uint64_t>("a ref's count");
    piece.steps = in.get<int64_t>("a ref's steps");
    piece.buffers = in.get<uint32_t>("a ref's buffers");
    // Checked by division, so that a corrupt count cannot overflow the product.
    if (piece.buffers > 0 && piece.count > in.left() / sizeof(float) / piece.buffers) {
      in.fail("the state is truncated: ref " + std::to_string(i) + " claims " +
              std::to_string(piece.buffers) + " x " + std::to_string(piece.count) + " floats in " +
              std::to_string(in.left()) + " bytes");
    }
    piece.data.resize(piece.buffers * piece.count);
    in.get_bytes(piece.data.data(), piece.data.size() * sizeof(float), "a ref's state");
  }
  if (in.left() != 0) in.fail(std::to_string(in.left()) + " bytes follow the state's end");
  return state;
}

}  // namespace ccl::training::optim_detail
