// ZeRO's checkpoint: each rank writes its own slices (master values, optimizer state) to a file of
// its own, so saving needs no communication and no rank ever holds the whole state. The header
// names the group size and every parameter's count and unit: a file loads only into the same
// layout (the stage and precision may differ, since the slices do not depend on them).
//
// Format (native byte order, the files stay on the machines that wrote them):
//   "CCLZERO1", u32 version, u32 rank, u32 nranks, u64 nparams, then per parameter
//   (u64 count, u64 unit, u8 exclude); per unit its u64 slice length and the floats;
//   u64 optimizer state length and Optimizer::save_state's bytes.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include "ccl/training/zero.hpp"
#include "zero/unit_state.h"

namespace ccl::training {

namespace {

constexpr char kMagic[8] = {'C', 'C', 'L', 'Z', 'E', 'R', 'O', '1'};
constexpr uint32_t kVersion = 1;

std::string file_of(const std::string& prefix, int rank, int nranks) {
  return prefix + ".zero-" + std::to_string(rank) + "-of-" + std::to_string(nranks);
}

template <class T>
void put(std::ofstream& out, const T& value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Reads what put wrote; a short file is a clear error, never garbage.
class Reader {
 public:
  Reader(std::ifstream& in, std::string path) : in_(in), path_(std::move(path)) {}
  template <class T>
  T get(const char* what) {
    T value{};
    bytes(reinterpret_cast<char*>(&value), sizeof(T), what);
    return value;
  }
  void bytes(char* out, size_t n, const char* what) {
    if (!in_.read(out, static_cast<std::streamsize>(n))) {
      throw std::invalid_argument("ccl::training::Zero::load: " + path_ + " ends before its " +
                                  what);
    }
  }

 private:
  std::ifstream& in_;
  std::string path_;
};

[[noreturn]] void mismatch(const std::string& path, const std::string& what) {
  throw std::invalid_argument("ccl::training::Zero::load: " + path + " does not fit: " + what);
}

}  // namespace

void Zero::save(const std::string& prefix) const {
  const std::string path = file_of(prefix, dp_.rank(), dp_.size());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(cclSystemError, "ccl::training::Zero::save: cannot create " + tmp);
    out.write(kMagic, sizeof kMagic);
    put(out, kVersion);
    put(out, static_cast<uint32_t>(dp_.rank()));
    put(out, static_cast<uint32_t>(dp_.size()));
    put(out, static_cast<uint64_t>(params_.size()));
    for (const ZeroParam& p : params_) {
      put(out, static_cast<uint64_t>(p.count));
      put(out, static_cast<uint64_t>(p.unit));
      put(out, static_cast<uint8_t>(p.exclude));
    }
    const size_t rank = static_cast<size_t>(dp_.rank());
    for (size_t v = 0; v < units_.size(); ++v) {
      const UnitState& s = *state_[v];
      const float* master = s.master_slice(rank * units_[v].shard);
      put(out, static_cast<uint64_t>(units_[v].shard));
      out.write(reinterpret_cast<const char*>(master),
                static_cast<std::streamsize>(units_[v].shard * sizeof(float)));
    }
    const std::vector<char> state = optimizer_->save_state(pieces_);
    put(out, static_cast<uint64_t>(state.size()));
    out.write(state.data(), static_cast<std::streamsize>(state.size()));
    if (!out.flush()) throw Error(cclSystemError, "ccl::training::Zero::save: cannot write " + tmp);
  }
  // Renamed into place: a crash mid-save leaves the previous checkpoint whole.
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error(cclSystemError, "ccl::training::Zero::save: cannot rename " + tmp + " to " + path +
                                    ": " + std::strerror(errno));
  }
}

void Zero::load(const std::string& prefix) {
  const std::string path = file_of(prefix, dp_.rank(), dp_.size());
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::invalid_argument("ccl::training::Zero::load: cannot open " + path +
                                " (saved by a group of another size, or not saved)");
  }
  Reader r(in, path);
  char magic[sizeof kMagic];
  r.bytes(magic, sizeof magic, "header");
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) mismatch(path, "not a ZeRO checkpoint");
  if (const auto v = r.get<uint32_t>("version"); v != kVersion) {
    mismatch(path, "version " + std::to_string(v) + ", not " + std::to_string(kVersion));
  }
  const auto rank = r.get<uint32_t>("rank");
  const auto nranks = r.get<uint32_t>("group size");
  if (rank != static_cast<uint32_t>(dp_.rank()) || nranks != static_cast<uint32_t>(dp_.size())) {
    mismatch(path, "written by rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  }
  const auto nparams = r.get<uint64_t>("parameter count");
  if (nparams != params_.size()) {
    mismatch(path, std::to_string(nparams) + " parameters, not " + std::to_string(params_.size()));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto count = r.get<uint64_t>("parameter counts");
    const auto unit = r.get<uint64_t>("parameter units");
    (void)r.get<uint8_t>("parameter flags");
    if (count != params_[i].count || unit != params_[i].unit) {
      mismatch(path, "parameter " + std::to_string(i) + " has " + std::to_string(count) +
                         " values in unit " + std::to_string(unit) + ", not " +
                         std::to_string(params_[i].count) + " in unit " +
                         std::to_string(params_[i].unit));
    }
  }
  // Everything is read and checked before anything changes: a file that does not fit leaves the
  // engine as it was.
  std::vector<std::vector<float>> slices(units_.size());
  for (size_t v = 0; v < units_.size(); ++v) {
    if (r.get<uint64_t>("slice length") != units_[v].shard) mismatch(path, "a slice length");
    slices[v].resize(units_[v].shard);
    r.bytes(reinterpret_cast<char*>(slices[v].data()), units_[v].shard * sizeof(float), "slices");
  }
  std::vector<char> state(r.get<uint64_t>("optimizer state length"));
  r.bytes(state.data(), state.size(), "optimizer state");
  stream_.synchronize();  // nothing queued may write what is loaded
  optimizer_->load_state(pieces_, state);
  const size_t my_rank = static_cast<size_t>(dp_.rank());
  for (size_t v = 0; v < units_.size(); ++v) {
    UnitState& s = *state_[v];
    float* master = s.master_slice(my_rank * units_[v].shard);
    std::copy(slices[v].begin(), slices[v].end(), master);
  }
  if (options_.stage < 3) gather_working_copies();
  for (size_t v = 0; options_.stage == 3 && v < units_.size(); ++v) release(v);
}

}  // namespace ccl::training
