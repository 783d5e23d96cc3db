/**
 * @file training/tensor_parallel.hpp
 * @brief Megatron-style tensor parallelism on float tensors over a tp communicator: the f and g
 * operators, their sequence-parallel counterparts, column- and row-parallel linear layers and a
 * vocabulary-parallel embedding.
 *
 * Part of the training layer (`#include <ccl/training.hpp>`, in libccl).
 *
 * Conventions. A tensor is a row-major matrix; rows are tokens (sequence position first, so a
 * rank's block of the sequence is a contiguous block of rows), columns are features. A linear
 * layer computes y = x·Wᵀ + b with W of shape [out_features, in_features] (torch's nn.Linear).
 * Every split must be even: out_features (column-parallel), in_features (row-parallel), the
 * vocabulary (embedding) and, with sequence parallelism, the token count must be multiples of the
 * tp size; otherwise ccl::Error with cclInvalidArgument names the argument (Megatron pads the
 * vocabulary to a multiple of tp for the same reason). Gradients accumulate, as in a trainer:
 * zero_grad() clears them.
 *
 * The MLP block of a transformer layer, on each rank of the tp group:
 * @code
 * using namespace ccl::training;
 * ColumnParallelLinear fc1(mesh.tp(), {.in_features = h, .out_features = 4 * h},
 *                          shard_rows(w1, tp, rank), shard_rows(b1, tp, rank));
 * RowParallelLinear fc2(mesh.tp(), {.in_features = 4 * h, .out_features = h},
 *                       shard_cols(w2, tp, rank), b2);
 * fc1.forward(x, hidden);        // f on x (identity), hidden = this rank's 4h/tp features
 * // ... activation on hidden ...
 * fc2.forward(hidden, y);        // partial products, g (all-reduce), then + b2
 * fc2.backward(hidden, dy, dhidden);
 * fc1.backward(x, dhidden, dx);  // f's backward: all-reduce of dx
 * @endcode
 * With `.sequence_parallel = true`, x and y (and dx, dy) hold only this rank's tokens/tp rows:
 * f becomes an all-gather of x along the sequence (reduce-scatter of dx), g a reduce-scatter of y
 * (all-gather of dy).
 */
#ifndef CCL_TRAINING_TENSOR_PARALLEL_HPP_
#define CCL_TRAINING_TENSOR_PARALLEL_HPP_

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "../ccl.hpp"

namespace ccl::training {

/// A read-only row-major matrix over a caller's buffer: data.size() must be rows * cols.
struct ConstMatrix {
  std::span<const float> data;
  std::size_t rows = 0;
  std::size_t cols = 0;
};

/// A writable row-major matrix over a caller's buffer: data.size() must be rows * cols.
struct Matrix {
  std::span<float> data;
  std::size_t rows = 0;
  std::size_t cols = 0;
  operator ConstMatrix() const { return {data, rows, cols}; }
};

// ---- The operators (Megatron's f and g, and their sequence-parallel forms) -------------------

/// f forward: the identity (every rank already holds the whole input). Here for symmetry.
void f_forward(Communicator& tp, std::span<float> x);
/// f backward: all-reduce (sum) of the input gradient in place, each rank having contributed
/// the part that flows through its shard.
void f_backward(Communicator& tp, std::span<float> grad);
/// g forward: all-reduce (sum) in place of the partial outputs of a row-parallel layer.
void g_forward(Communicator& tp, std::span<float> x);
/// g backward: the identity (every rank needs the whole output gradient).
void g_backward(Communicator& tp, std::span<float> grad);

/// Sequence-parallel f forward: all-gather of this rank's block of rows `local`
/// ([rows/tp, cols]) into `full` ([rows, cols]), blocks in tp-rank order.
void gather_sequence_forward(Communicator& tp, ConstMatrix local, Matrix full);
/// Its backward: reduce-scatter (sum) of `full_grad` ([rows, cols]); this rank's block of rows
/// lands in `local_grad` ([rows/tp, cols]).
void gather_sequence_backward(Communicator& tp, ConstMatrix full_grad, Matrix local_grad);
/// Sequence-parallel g forward: reduce-scatter (sum) of the partial `full` ([rows, cols]);
/// this rank's block of rows lands in `local` ([rows/tp, cols]).
void scatter_sequence_forward(Communicator& tp, ConstMatrix full, Matrix local);
/// Its backward: all-gather of `local_grad` ([rows/tp, cols]) into `full_grad` ([rows, cols]).
void scatter_sequence_backward(Communicator& tp, ConstMatrix local_grad, Matrix full_grad);

// ---- Shards of full tensors (for initialization and tests) ------------------------------------

/// Block `index` of `parts` equal blocks of rows of `full` (a column-parallel weight or bias,
/// an embedding table's vocabulary slice), as a new buffer. cclInvalidArgument when `parts` does
/// not divide full.rows or index is outside [0, parts).
std::vector<float> shard_rows(ConstMatrix full, int parts, int index);
/// A vector (a bias) seen as one column: element block `index` of `parts`.
std::vector<float> shard_rows(std::span<const float> full, int parts, int index);
/// Block `index` of `parts` equal blocks of columns of `full` (a row-parallel weight's slice of
/// input features), rows kept: [full.rows, full.cols / parts].
std::vector<float> shard_cols(ConstMatrix full, int parts, int index);

// ---- Layers ----------------------------------------------------------------------------------

/// The full (unsplit) shape of a linear layer, and whether it runs sequence parallel.
struct LinearShape {
  std::size_t in_features = 0;
  std::size_t out_features = 0;
  /// Activations outside the layer hold tokens/tp rows (see the file comment).
  bool sequence_parallel = false;
};

/// A linear layer's shard of parameters and the gradients accumulated into it (both linear
/// layers below).
class LinearParameters {
 public:
  const std::vector<float>& weight() const { return weight_; }
  const std::vector<float>& bias() const { return bias_; }
  const std::vector<float>& grad_weight() const { return grad_weight_; }
  const std::vector<float>& grad_bias() const { return grad_bias_; }
  /// Clears the accumulated gradients (backward adds to them).
  void zero_grad() {
    grad_weight_.assign(weight_.size(), 0.0f);
    grad_bias_.assign(bias_.size(), 0.0f);
  }

 protected:
  LinearParameters(std::vector<float> weight, std::vector<float> bias)
      : weight_(std::move(weight)), bias_(std::move(bias)) {
    zero_grad();
  }
  std::vector<float> weight_, bias_, grad_weight_, grad_bias_;
};

/**
 * @brief y = x·Wᵀ + b split by output features: this rank holds rows
 * [rank·out/tp, (rank+1)·out/tp) of W and the same slice of b (an empty b: no bias).
 *
 * forward: f on x (identity; sequence parallel: all-gather of x's rows), then the local product;
 * y is [tokens, out/tp]. backward: dW += dyᵀ·x, db += Σ dy, dx = dy·W_shard then f's backward
 * (all-reduce; sequence parallel: reduce-scatter to this rank's rows). With sequence parallelism
 * backward gathers x again rather than keep the gathered copy, as Megatron does to save memory.
 */
class ColumnParallelLinear : public LinearParameters {
 public:
  ColumnParallelLinear(Communicator& tp, LinearShape shape, std::vector<float> weight_shard,
                       std::vector<float> bias_shard);

  /// x: [tokens, in] (sequence parallel: [tokens/tp, in]); y: [tokens, out/tp].
  void forward(ConstMatrix x, Matrix y);
  /// x as given to forward; dy: [tokens, out/tp]; dx: x's shape. Accumulates the gradients.
  void backward(ConstMatrix x, ConstMatrix dy, Matrix dx);

  std::size_t local_out() const { return local_out_; }

 private:
  // The full input: x itself, or (sequence parallel) its rows gathered from the tp group.
  ConstMatrix full_input(ConstMatrix x);

  Communicator& tp_;
  LinearShape shape_;
  std::size_t local_out_;
  std::vector<float> gathered_;  // scratch: the gathered input (sequence parallel)
};

/**
 * @brief y = x·Wᵀ + b split by input features: this rank holds columns
 * [rank·in/tp, (rank+1)·in/tp) of W, and the whole b (an empty b: no bias).
 *
 * forward: the local partial product x_shard·W_shardᵀ, g (all-reduce; sequence parallel:
 * reduce-scatter to this rank's rows), then + b, added once after the reduction rather than by
 * every rank. backward: g's backward (identity; sequence parallel: all-gather of dy), then
 * dx = dy·W_shard, dW += dyᵀ·x, db += Σ dy over all tokens (with sequence parallelism the
 * gathered dy already holds every token, so no extra all-reduce of db is needed).
 */
class RowParallelLinear : public LinearParameters {
 public:
  RowParallelLinear(Communicator& tp, LinearShape shape, std::vector<float> weight_shard,
                    std::vector<float> bias);

  /// x: [tokens, in/tp]; y: [tokens, out] (sequence parallel: [tokens/tp, out]).
  void forward(ConstMatrix x, Matrix y);
  /// x as given to forward; dy: y's shape; dx: [tokens, in/tp]. Accumulates the gradients.
  void backward(ConstMatrix x, ConstMatrix dy, Matrix dx);

  std::size_t local_in() const { return local_in_; }

 private:
  Communicator& tp_;
  LinearShape shape_;
  std::size_t local_in_;
  std::vector<float> partial_;   // scratch: the partial product (sequence parallel)
  std::vector<float> gathered_;  // scratch: the gathered output gradient (sequence parallel)
};

/// The full shape of an embedding table [vocab, hidden].
struct EmbeddingShape {
  std::size_t vocab = 0;
  std::size_t hidden = 0;
  /// The output holds tokens/tp rows (reduce-scatter instead of all-reduce).
  bool sequence_parallel = false;
};

/**
 * @brief An embedding table split by vocabulary: this rank holds rows
 * [rank·vocab/tp, (rank+1)·vocab/tp).
 *
 * forward: each token whose id is in this rank's slice gets its row, every other token zeros;
 * the all-reduce (sequence parallel: reduce-scatter) then gives every token its row, since
 * exactly one rank contributed it. backward: the output gradient (sequence parallel: all-gathered
 * first) is added to this rank's rows only, for the tokens whose ids it holds.
 * Every id must be in [0, vocab): cclInvalidArgument names the first one that is not, on every
 * rank alike (all ranks see the same ids) and before any communication.
 */
class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding(Communicator& tp, EmbeddingShape shape, std::vector<float> table_shard);

  /// ids: one per token; out: [tokens, hidden] (sequence parallel: [tokens/tp, hidden]).
  void forward(std::span<const std::int64_t> ids, Matrix out);
  /// ids as given to forward; dout: out's shape. Accumulates into grad_table().
  void backward(std::span<const std::int64_t> ids, ConstMatrix dout);

  /// This rank's first vocabulary row and its number of rows.
  std::size_t vocab_begin() const { return vocab_begin_; }
  std::size_t local_vocab() const { return local_vocab_; }
  const std::vector<float>& table() const { return table_; }
  const std::vector<float>& grad_table() const { return grad_table_; }
  void zero_grad();

 private:
  void check_ids(std::span<const std::int64_t> ids, const char* where) const;

  Communicator& tp_;
  EmbeddingShape shape_;
  std::size_t vocab_begin_, local_vocab_;
  std::vector<float> table_, grad_table_;
  std::vector<float> full_;  // scratch: all tokens' rows (sequence parallel)
};

}  // namespace ccl::training

#endif  // CCL_TRAINING_TENSOR_PARALLEL_HPP_
