// The optimizers' state as a whole (optim.hpp): its size, and its save and restore through the
// blob of state_blob.h, which records the kind and each piece's buffers so that a blob that does
// not fit is refused by name before anything changes.
#include <stdexcept>
#include <string>

#include "ccl/training/optim.hpp"
#include "optim/state_blob.h"

namespace ccl::training {

namespace {

std::string ref_name(size_t index, const ParamRef& ref) {
  return "ref " + std::to_string(index) + " (count " + std::to_string(ref.count) + ")";
}

}  // namespace

size_t Optimizer::state_bytes() const {
  size_t bytes = 0;
  for (const auto& [param, s] : state_) bytes += s.data.size() * sizeof(float);
  return bytes;
}

std::vector<char> Optimizer::save_state(std::span<const ParamRef> refs) const {
  optim_detail::BlobWriter out(kind_, step_, refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    const auto known = state_.find(refs[i].param);
    if (refs[i].param == nullptr || known == state_.end()) {
      out.absent();
      continue;
    }
    const PieceState& s = known->second;
    if (s.count != refs[i].count) {
      throw std::invalid_argument(std::string(prefix_) + "save_state: " + ref_name(i, refs[i]) +
                                  " has state for " + std::to_string(s.count) + " elements");
    }
    out.present(s.count, s.steps, static_cast<uint32_t>(buffers()), s.data);
  }
  return out.take();
}

void Optimizer::load_state(std::span<const ParamRef> refs, std::span<const char> bytes) {
  optim_detail::SavedState saved = optim_detail::read_blob(prefix_, bytes);
  const std::string where = std::string(prefix_) + "load_state: ";
  if (saved.kind != kind_) {
    throw std::invalid_argument(where + "the state is of a " + saved.kind + " optimizer, not " +
                                kind_);
  }
  if (saved.pieces.size() != refs.size()) {
    throw std::invalid_argument(where + "the state holds " + std::to_string(saved.pieces.size()) +
                                " refs, but " + std::to_string(refs.size()) + " were given");
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    const optim_detail::SavedPiece& piece = saved.pieces[i];
    if (!piece.present) continue;
    if (refs[i].param == nullptr || piece.count != refs[i].count) {
      throw std::invalid_argument(where + ref_name(i, refs[i]) +
                                  (refs[i].param == nullptr ? " has a null param" : "") +
                                  ": its state has count " + std::to_string(piece.count));
    }
    if (piece.buffers != buffers()) {
      throw std::invalid_argument(where + ref_name(i, refs[i]) + ": its state has " +
                                  std::to_string(piece.buffers) + " buffers per element, this " +
                                  kind_ + " keeps " + std::to_string(buffers()));
    }
  }
  // Everything fits: nothing below throws but for memory.
  for (size_t i = 0; i < refs.size(); ++i) {
    optim_detail::SavedPiece& piece = saved.pieces[i];
    if (!piece.present) {
      if (refs[i].param != nullptr) state_.erase(refs[i].param);
      continue;
    }
    PieceState& s = state_[refs[i].param];
    s.count = piece.count;
    s.steps = piece.steps;
    s.data = std::move(piece.data);
  }
  step_ = saved.steps;
}

}  // namespace ccl::training
