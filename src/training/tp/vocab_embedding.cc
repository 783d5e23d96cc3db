// VocabParallelEmbedding: the table split by vocabulary rows; every rank looks up the ids it
// holds, zeros elsewhere, and the sum over the tp group gives every token its row.
#include <algorithm>

#include "ccl/training/tensor_parallel.hpp"
#include "tp/tp_checks.h"

namespace ccl::training {

using namespace tp_detail;

namespace {
constexpr const char* kForward = "VocabParallelEmbedding::forward";
constexpr const char* kBackward = "VocabParallelEmbedding::backward";
}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(Communicator& tp, EmbeddingShape shape,
                                               std::vector<float> table_shard)
    : tp_(tp), shape_(shape), table_(std::move(table_shard)) {
  constexpr const char* where = "VocabParallelEmbedding";
  check_divides(where, "shape.vocab", shape_.vocab, tp_.size());
  local_vocab_ = shape_.vocab / static_cast<std::size_t>(tp_.size());
  vocab_begin_ = local_vocab_ * static_cast<std::size_t>(tp_.rank());
  if (table_.size() != local_vocab_ * shape_.hidden) {
    invalid(where, "table_shard has " + std::to_string(table_.size()) +
                       " elements, expected vocab/tp " + std::to_string(local_vocab_) +
                       " * hidden " + std::to_string(shape_.hidden));
  }
  zero_grad();
}

void VocabParallelEmbedding::zero_grad() { grad_table_.assign(table_.size(), 0.0f); }

void VocabParallelEmbedding::check_ids(std::span<const std::int64_t> ids, const char* where) const {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= shape_.vocab) {
      invalid(where, "ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                         " is outside [0, vocab " + std::to_string(shape_.vocab) + ")");
    }
  }
  if (shape_.sequence_parallel) check_divides(where, "ids.size() (tokens)", ids.size(), tp_.size());
}

void VocabParallelEmbedding::forward(std::span<const std::int64_t> ids, Matrix out) {
  check_ids(ids, kForward);
  const std::size_t n = static_cast<std::size_t>(tp_.size());
  const std::size_t rows = shape_.sequence_parallel ? ids.size() / n : ids.size();
  check_shape(kForward, "out", out, rows, shape_.hidden);
  // Every token's row from this rank: its own, or zeros (another rank holds it).
  std::span<float> mine = out.data;
  if (shape_.sequence_parallel) {
    full_.resize(ids.size() * shape_.hidden);
    mine = full_;
  }
  const std::size_t h = shape_.hidden;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::size_t id = static_cast<std::size_t>(ids[i]);
    float* row = mine.data() + i * h;
    if (id >= vocab_begin_ && id < vocab_begin_ + local_vocab_) {
      std::copy_n(table_.data() + (id - vocab_begin_) * h, h, row);
    } else {
      std::fill_n(row, h, 0.0f);
    }
  }
  if (shape_.sequence_parallel) {
    scatter_sequence_forward(tp_, ConstMatrix{full_, ids.size(), h}, out);
  } else {
    g_forward(tp_, out.data);
  }
}

void VocabParallelEmbedding::backward(std::span<const std::int64_t> ids, ConstMatrix dout) {
  check_ids(ids, kBackward);
  const std::size_t n = static_cast<std::size_t>(tp_.size());
  const std::size_t rows = shape_.sequence_parallel ? ids.size() / n : ids.size();
  check_shape(kBackward, "dout", dout, rows, shape_.hidden);
  const std::size_t h = shape_.hidden;
  ConstMatrix full = dout;
  if (shape_.sequence_parallel) {
    full_.resize(ids.size() * h);
    Matrix gathered{full_, ids.size(), h};
    scatter_sequence_backward(tp_, dout, gathered);
    full = gathered;
  }
  // Only this rank's rows: the gradient of a row held elsewhere is that rank's to add.
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::size_t id = static_cast<std::size_t>(ids[i]);
    if (id < vocab_begin_ || id >= vocab_begin_ + local_vocab_) continue;
    float* grad = grad_table_.data() + (id - vocab_begin_) * h;
    for (std::size_t c = 0; c < h; ++c) grad[c] += full.data[i * h + c];
  }
}

}  // namespace ccl::training
