// A small multilayer perceptron in plain C++ (tanh hidden layers, linear output, mean squared
// error), written so that its backward pass can hand each layer's gradients to a DDP reducer as
// soon as they are computed. Used by examples/ddp_train and the training tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ddp_example {

class Mlp {
 public:
  /// Layer widths, input first: {32, 64, 64, 1} is two hidden layers of 64. Weights drawn from
  /// a seeded normal(0, 1/sqrt(fan_in)), biases 0.
  Mlp(std::vector<size_t> widths, uint32_t seed);

  /// Parameter tensors in registration order (forward order): W0, b0, W1, b1, ...
  size_t num_params() const { return params_.size(); }
  std::span<float> param(size_t i) { return params_[i]; }
  std::span<const float> param(size_t i) const { return params_[i]; }
  bool is_bias(size_t i) const { return i % 2 == 1; }
  size_t input_width() const { return widths_.front(); }
  size_t output_width() const { return widths_.back(); }

  /// Forward on `batch` rows of `x`; returns the outputs (batch x output_width), keeping what
  /// backward needs.
  const std::vector<float>& forward(std::span<const float> x, size_t batch);
  /// Mean squared error of the last forward against `y`, averaged over the batch's rows.
  double loss(std::span<const float> y) const;
  /// Backward of the last forward's loss. For each parameter, last layer first, writes its
  /// gradient into grad_of(i) (assigning, not accumulating) and then calls ready(i).
  void backward(std::span<const float> y, const std::function<std::span<float>(size_t)>& grad_of,
                const std::function<void(size_t)>& ready);

 private:
  std::vector<size_t> widths_;
  std::vector<std::vector<float>> params_;
  std::vector<std::vector<float>> acts_;  // acts_[0] = input, acts_[l+1] = output of layer l
  size_t batch_ = 0;
};

/// The learnable task: y = teacher(x) for x ~ normal(0, 1), the teacher a fixed random MLP of
/// the same input and output widths. Sample `index` of step `step` is the same on every rank
/// and for every rank count, so 4 ranks of batch B see what 1 rank of batch 4B sees.
struct Task {
  explicit Task(size_t input, size_t output, uint32_t seed);
  void sample(int64_t step, int64_t index, std::span<float> x, std::span<float> y);

 private:
  Mlp teacher_;
};

}  // namespace ddp_example
