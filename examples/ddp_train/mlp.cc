#include "mlp.h"

#include <cmath>
#include <random>

namespace ddp_example {

Mlp::Mlp(std::vector<size_t> widths, uint32_t seed) : widths_(std::move(widths)) {
  std::mt19937 gen(seed);
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    const size_t in = widths_[l], out = widths_[l + 1];
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(in)));
    std::vector<float> w(in * out);
    for (auto& v : w) v = normal(gen);
    params_.push_back(std::move(w));
    params_.emplace_back(out, 0.0f);
  }
}

const std::vector<float>& Mlp::forward(std::span<const float> x, size_t batch) {
  batch_ = batch;
  const size_t layers = widths_.size() - 1;
  acts_.assign(layers + 1, {});
  acts_[0].assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(batch * widths_[0]));
  for (size_t l = 0; l < layers; ++l) {
    const size_t in = widths_[l], out = widths_[l + 1];
    const float* w = params_[2 * l].data();
    const float* b = params_[2 * l + 1].data();
    std::vector<float>& y = acts_[l + 1];
    y.assign(batch * out, 0.0f);
    for (size_t r = 0; r < batch; ++r) {
      const float* xr = acts_[l].data() + r * in;
      float* yr = y.data() + r * out;
      for (size_t o = 0; o < out; ++o) yr[o] = b[o];
      for (size_t i = 0; i < in; ++i) {  // W is in x out, row i: what input i adds to each output
        const float xi = xr[i];
        const float* wi = w + i * out;
        for (size_t o = 0; o < out; ++o) yr[o] += xi * wi[o];
      }
      if (l + 1 < layers) {
        for (size_t o = 0; o < out; ++o) yr[o] = std::tanh(yr[o]);
      }
    }
  }
  return acts_.back();
}

double Mlp::loss(std::span<const float> y) const {
  const std::vector<float>& out = acts_.back();
  double sum = 0;
  for (size_t i = 0; i < out.size(); ++i)
    sum += (out[i] - y[i]) * static_cast<double>(out[i] - y[i]);
  return sum / static_cast<double>(batch_);
}

void Mlp::backward(std::span<const float> y, const std::function<std::span<float>(size_t)>& grad_of,
                   const std::function<void(size_t)>& ready) {
  const size_t layers = widths_.size() - 1;
  // d loss / d output: 2 (out − y) / batch.
  std::vector<float> delta(acts_.back().size());
  for (size_t i = 0; i < delta.size(); ++i) {
    delta[i] = 2.0f * (acts_.back()[i] - y[i]) / static_cast<float>(batch_);
  }
  for (size_t l = layers; l-- > 0;) {
    const size_t in = widths_[l], out = widths_[l + 1];
    const std::vector<float>& x = acts_[l];
    std::span<float> gw = grad_of(2 * l), gb = grad_of(2 * l + 1);
    std::fill(gw.begin(), gw.end(), 0.0f);
    std::fill(gb.begin(), gb.end(), 0.0f);
    for (size_t r = 0; r < batch_; ++r) {
      const float* dr = delta.data() + r * out;
      const float* xr = x.data() + r * in;
      for (size_t i = 0; i < in; ++i) {
        const float xi = xr[i];
        float* gwi = gw.data() + i * out;
        for (size_t o = 0; o < out; ++o) gwi[o] += xi * dr[o];
      }
      for (size_t o = 0; o < out; ++o) gb[o] += dr[o];
    }
    ready(2 * l);
    ready(2 * l + 1);
    if (l == 0) break;
    // delta for the layer below: (delta · Wᵀ) ⊙ tanh'(its output) = ... ⊙ (1 − a²).
    std::vector<float> below(batch_ * in, 0.0f);
    const float* w = params_[2 * l].data();
    for (size_t r = 0; r < batch_; ++r) {
      const float* dr = delta.data() + r * out;
      float* br = below.data() + r * in;
      for (size_t i = 0; i < in; ++i) {
        const float* wi = w + i * out;
        float s = 0;
        for (size_t o = 0; o < out; ++o) s += wi[o] * dr[o];
        br[i] = s * (1.0f - x[r * in + i] * x[r * in + i]);
      }
    }
    delta = std::move(below);
  }
}

Task::Task(size_t input, size_t output, uint32_t seed) : teacher_({input, 32, output}, seed) {}

void Task::sample(int64_t step, int64_t index, std::span<float> x, std::span<float> y) {
  std::mt19937 gen(static_cast<uint32_t>(step * 1000003 + index));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(gen);
  const auto& out = teacher_.forward(x, 1);
  std::copy(out.begin(), out.end(), y.begin());
}

}  // namespace ddp_example
