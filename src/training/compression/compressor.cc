// The error-feedback loop every compressor shares (p = g + e; Δ = C(p); e' = p − Δ), the
// bookkeeping of exchanges between start and finish, and make_compressor.
#include <charconv>
#include <stdexcept>
#include <string>

#include "ccl/training/compression.hpp"

namespace ccl::training {

void Compressor::start(ccl::Communicator& comm, size_t key, std::span<const float> grad,
                       ccl::StreamRef stream) {
  auto slot = pending_.try_emplace(key).first;
  if (slot->second.active) {
    throw std::logic_error("ccl::training::" + name() + ": start for key " + std::to_string(key) +
                           " while its previous exchange is not finished");
  }
  try {
    std::vector<float>& e = errors_[key];
    if (e.size() != grad.size()) {
      if (!e.empty()) {
        throw std::invalid_argument("ccl::training::" + name() + ": key " + std::to_string(key) +
                                    " had " + std::to_string(e.size()) + " elements, now " +
                                    std::to_string(grad.size()));
      }
      e.assign(grad.size(), 0.0f);
    }
    p_.resize(grad.size());
    for (size_t i = 0; i < grad.size(); ++i) {
      p_[i] = grad[i] + e[i];
      e[i] = 0.0f;
    }
    Pending& pending = slot->second;
    pending.count = grad.size();
    std::span<float> error = error_feedback_ ? std::span<float>(e) : std::span<float>();
    bytes_sent_ += compress_and_queue(comm, key, p_, error, pending, stream);
    pending.active = true;
  } catch (...) {
    slot->second.active = false;
    throw;
  }
}

void Compressor::finish(ccl::Communicator& comm, size_t key, std::span<float> grad) {
  auto it = pending_.find(key);
  if (it == pending_.end() || !it->second.active) {
    throw std::logic_error("ccl::training::" + name() + ": finish for key " + std::to_string(key) +
                           " without a start");
  }
  Pending& pending = it->second;
  pending.active = false;
  if (grad.size() != pending.count) {
    throw std::invalid_argument("ccl::training::" + name() + ": finish for key " +
                                std::to_string(key) + " with " + std::to_string(grad.size()) +
                                " elements, start had " + std::to_string(pending.count));
  }
  bytes_sent_ += decompress(comm, key, pending, grad);
}

void Compressor::all_reduce(ccl::Communicator& comm, size_t key, std::span<float> grad) {
  start(comm, key, grad);
  finish(comm, key, grad);
}

std::span<const float> Compressor::error(size_t key) const {
  auto it = errors_.find(key);
  return it == errors_.end() ? std::span<const float>() : std::span<const float>(it->second);
}

void Compressor::forget() {
  for (const auto& entry : pending_) {
    if (entry.second.active) {
      throw std::logic_error("ccl::training::" + name() + ": forget while an exchange is pending");
    }
  }
  errors_.clear();
  pending_.clear();
}

namespace {

double parse_ratio(std::string_view spec, std::string_view text) {
  double ratio = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ratio);
  if (ec != std::errc() || end != text.data() + text.size() || !(ratio > 0.0 && ratio <= 1.0)) {
    throw std::invalid_argument("ccl::training::make_compressor: \"" + std::string(spec) +
                                "\": the ratio must be a number in (0, 1]");
  }
  return ratio;
}

}  // namespace

std::unique_ptr<Compressor> make_compressor(std::string_view spec) {
  if (spec == "sign") return std::make_unique<ScaledSign>();
  if (spec == "onebit") return std::make_unique<OneBit>();
  for (const bool fp16 : {false, true}) {
    const std::string_view prefix = fp16 ? "topk16:" : "topk:";
    if (spec.starts_with(prefix)) {
      return std::make_unique<TopK>(
          TopKOptions{.ratio = parse_ratio(spec, spec.substr(prefix.size())), .fp16_values = fp16});
    }
  }
  throw std::invalid_argument("ccl::training::make_compressor: \"" + std::string(spec) +
                              "\" is not a compressor (topk:R, topk16:R, sign, onebit)");
}

}  // namespace ccl::training
