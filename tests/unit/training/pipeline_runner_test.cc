// run_pipeline with real communicators (ranks as threads over shared memory): 2- and 4-stage
// pipelines, GPipe, 1F1B and interleaved, give the gradients of the unpipelined model.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/training/pipeline.hpp"

namespace {

using ccl::training::PipelineKind;
using ccl::training::PipelineStage;
using ccl::training::run_pipeline;

// The model: a chain of layers y = tanh(W x + b) of width 4; the loss of a micro-batch is
// 0.5·|y − target|², and the loss of the iteration the sum over micro-batches.
constexpr int kWidth = 4;
constexpr int kLayersPerVirtualStage = 2;
using Vec = std::array<float, kWidth>;

struct Layer {
  std::array<float, kWidth * kWidth> w{};
  Vec b{};
};

// Deterministic values in [-1, 1), the same on every thread.
float noise(unsigned seed) {
  seed = seed * 2654435761u + 0x9e3779b9u;
  seed ^= seed >> 15;
  seed *= 2246822519u;
  seed ^= seed >> 13;
  return static_cast<float>(seed % 20000u) / 10000.0f - 1.0f;
}

std::vector<Layer> make_model(int layers) {
  std::vector<Layer> model(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    Layer& layer = model[static_cast<size_t>(l)];
    for (int i = 0; i < kWidth * kWidth; ++i) layer.w[i] = 0.8f * noise(1000u * l + i);
    for (int i = 0; i < kWidth; ++i) layer.b[i] = 0.2f * noise(1000u * l + 500u + i);
  }
  return model;
}

Vec input_of(int microbatch) {
  Vec x;
  for (int i = 0; i < kWidth; ++i) x[i] = noise(77u + 10u * microbatch + i);
  return x;
}

Vec target_of(int microbatch) {
  Vec t;
  for (int i = 0; i < kWidth; ++i) t[i] = 0.5f * noise(99991u + 10u * microbatch + i);
  return t;
}

Vec layer_forward(const Layer& layer, const Vec& x) {
  Vec y;
  for (int o = 0; o < kWidth; ++o) {
    float z = layer.b[o];
    for (int i = 0; i < kWidth; ++i) z += layer.w[o * kWidth + i] * x[i];
    y[o] = std::tanh(z);
  }
  return y;
}

// Adds this micro-batch's dL/dW and dL/db to `grad`; returns dL/dx.
Vec layer_backward(const Layer& layer, const Vec& x, const Vec& y, const Vec& dy, Layer& grad) {
  Vec dx{};
  for (int o = 0; o < kWidth; ++o) {
    const float dz = dy[o] * (1.0f - y[o] * y[o]);
    grad.b[o] += dz;
    for (int i = 0; i < kWidth; ++i) {
      grad.w[o * kWidth + i] += dz * x[i];
      dx[i] += dz * layer.w[o * kWidth + i];
    }
  }
  return dx;
}

struct Result {
  std::vector<Layer> grads;
  double loss = 0.0;
};

// The unpipelined model on one thread.
Result reference(int layers, int microbatches) {
  const std::vector<Layer> model = make_model(layers);
  Result r{std::vector<Layer>(static_cast<size_t>(layers)), 0.0};
  for (int mb = 0; mb < microbatches; ++mb) {
    std::vector<Vec> acts{input_of(mb)};
    for (const Layer& layer : model) acts.push_back(layer_forward(layer, acts.back()));
    const Vec t = target_of(mb);
    Vec dy;
    for (int i = 0; i < kWidth; ++i) {
      dy[i] = acts.back()[i] - t[i];
      r.loss += 0.5 * dy[i] * dy[i];
    }
    for (int l = layers - 1; l >= 0; --l) {
      const size_t i = static_cast<size_t>(l);
      dy = layer_backward(model[i], acts[i], acts[i + 1], dy, r.grads[i]);
    }
  }
  return r;
}

// One rank's part of the model: its chunks' layers, the activations each micro-batch's backward
// needs, its gradients, written into `out` (each layer has one owner).
class ModelStage {
 public:
  ModelStage(int rank, int stages, int virtual_stages, Result& out, std::mutex& loss_mutex)
      : rank_(rank),
        stages_(stages),
        last_(stages * virtual_stages - 1),
        model_(make_model((last_ + 1) * kLayersPerVirtualStage)),
        out_(out),
        loss_mutex_(loss_mutex) {}

  PipelineStage stage() {
    PipelineStage s;
    s.activation_count = kWidth;
    s.forward = [this](int chunk, int mb, std::span<const float> in, std::span<float> out) {
      forward(chunk, mb, in, out);
    };
    s.backward = [this](int chunk, int mb, std::span<const float> out_grad,
                        std::span<float> in_grad) { backward(chunk, mb, out_grad, in_grad); };
    return s;
  }

  bool drained() const { return acts_.empty(); }

 private:
  int first_layer(int chunk) const { return (chunk * stages_ + rank_) * kLayersPerVirtualStage; }

  void forward(int chunk, int mb, std::span<const float> in, std::span<float> out) {
    const int vs = chunk * stages_ + rank_;
    ASSERT_EQ(in.size(), vs == 0 ? 0u : size_t{kWidth});
    ASSERT_EQ(out.size(), vs == last_ ? 0u : size_t{kWidth});
    Vec x = input_of(mb);
    if (vs != 0) std::copy(in.begin(), in.end(), x.begin());
    std::vector<Vec>& acts = acts_[{chunk, mb}];
    ASSERT_TRUE(acts.empty()) << "forward of chunk " << chunk << " micro-batch " << mb << " twice";
    acts.push_back(x);
    for (int l = 0; l < kLayersPerVirtualStage; ++l) {
      acts.push_back(
          layer_forward(model_[static_cast<size_t>(first_layer(chunk) + l)], acts.back()));
    }
    if (vs != last_) std::copy(acts.back().begin(), acts.back().end(), out.begin());
  }

  void backward(int chunk, int mb, std::span<const float> out_grad, std::span<float> in_grad) {
    const int vs = chunk * stages_ + rank_;
    ASSERT_EQ(out_grad.size(), vs == last_ ? 0u : size_t{kWidth});
    ASSERT_EQ(in_grad.size(), vs == 0 ? 0u : size_t{kWidth});
    auto found = acts_.find({chunk, mb});
    ASSERT_NE(found, acts_.end()) << "backward of chunk " << chunk << " micro-batch " << mb
                                  << " without its forward";
    const std::vector<Vec> acts = std::move(found->second);
    acts_.erase(found);
    Vec dy;
    if (vs == last_) {
      const Vec t = target_of(mb);
      double loss = 0.0;
      for (int i = 0; i < kWidth; ++i) {
        dy[i] = acts.back()[i] - t[i];
        loss += 0.5 * dy[i] * dy[i];
      }
      std::lock_guard lock(loss_mutex_);
      out_.loss += loss;
    } else {
      std::copy(out_grad.begin(), out_grad.end(), dy.begin());
    }
    for (int l = kLayersPerVirtualStage - 1; l >= 0; --l) {
      const size_t layer = static_cast<size_t>(first_layer(chunk) + l);
      const size_t i = static_cast<size_t>(l);
      dy = layer_backward(model_[layer], acts[i], acts[i + 1], dy, out_.grads[layer]);
    }
    if (vs != 0) std::copy(dy.begin(), dy.end(), in_grad.begin());
  }

  const int rank_;
  const int stages_;
  const int last_;
  const std::vector<Layer> model_;
  Result& out_;
  std::mutex& loss_mutex_;
  std::map<std::pair<int, int>, std::vector<Vec>> acts_;  // (chunk, micro-batch) -> activations
};

struct Case {
  PipelineKind kind;
  int stages;
  int microbatches;
  int virtual_stages;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const char* kind = c.kind == PipelineKind::GPipe      ? "GPipe"
                     : c.kind == PipelineKind::OneFOneB ? "OneFOneB"
                                                        : "Interleaved";
  return std::string(kind) + "_" + std::to_string(c.stages) + "stages_" +
         std::to_string(c.microbatches) + "mb_" + std::to_string(c.virtual_stages) + "chunks";
}

class PipelineRunner : public testing::TestWithParam<Case> {};

TEST_P(PipelineRunner, GivesTheGradientsOfTheUnpipelinedModel) {
  const Case c = GetParam();
  const int layers = c.stages * c.virtual_stages * kLayersPerVirtualStage;
  Result pipelined{std::vector<Layer>(static_cast<size_t>(layers)), 0.0};
  std::mutex loss_mutex;
  std::atomic<int> drained{0};
  ccl_test::run_ranks(c.stages, [&](ccl::Communicator& comm) {
    ModelStage model(comm.rank(), comm.size(), c.virtual_stages, pipelined, loss_mutex);
    run_pipeline(comm, c.kind, c.microbatches, model.stage(), c.virtual_stages);
    if (model.drained()) ++drained;
  });
  EXPECT_EQ(drained.load(), c.stages) << "a rank kept activations: a backward did not run";

  const Result expected = reference(layers, c.microbatches);
  EXPECT_NEAR(pipelined.loss, expected.loss, 1e-5);
  for (size_t l = 0; l < expected.grads.size(); ++l) {
    for (size_t i = 0; i < expected.grads[l].w.size(); ++i) {
      ASSERT_NEAR(pipelined.grads[l].w[i], expected.grads[l].w[i], 1e-5) << "layer " << l;
    }
    for (size_t i = 0; i < expected.grads[l].b.size(); ++i) {
      ASSERT_NEAR(pipelined.grads[l].b[i], expected.grads[l].b[i], 1e-5) << "layer " << l;
    }
  }
  // The gradients are not trivially zero.
  EXPECT_GT(std::abs(expected.grads.front().w[0]) + std::abs(expected.grads.back().b[0]), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineRunner,
    testing::Values(Case{PipelineKind::GPipe, 1, 4, 1}, Case{PipelineKind::OneFOneB, 1, 4, 1},
                    Case{PipelineKind::Interleaved, 1, 3, 3}, Case{PipelineKind::GPipe, 2, 4, 1},
                    Case{PipelineKind::GPipe, 4, 8, 1}, Case{PipelineKind::OneFOneB, 2, 4, 1},
                    Case{PipelineKind::OneFOneB, 4, 8, 1}, Case{PipelineKind::OneFOneB, 4, 2, 1},
                    Case{PipelineKind::Interleaved, 2, 4, 2},
                    Case{PipelineKind::Interleaved, 2, 8, 2},
                    Case{PipelineKind::Interleaved, 4, 8, 2}),
    case_name);

// Messages far larger than the transport's buffering (CCL_BUFFSIZE, 4 MiB by default): a send
// then completes only once its receive is posted, so the grouping of sends and receives must be
// free of cycles, not merely rely on buffering. The stage adds 1 per virtual stage forward and
// backward, so the last values tell whether every message took the right path.
void run_large(PipelineKind kind, int stages, int microbatches, int virtual_stages) {
  constexpr size_t kCount = size_t{3} << 20;  // 12 MiB of floats per message
  const int last = stages * virtual_stages - 1;
  std::atomic<int> checked{0};
  ccl_test::run_ranks(stages, [&](ccl::Communicator& comm) {
    const int rank = comm.rank();
    PipelineStage s;
    s.activation_count = kCount;
    s.forward = [&](int chunk, int mb, std::span<const float> in, std::span<float> out) {
      const int vs = chunk * stages + rank;
      const float value = vs == 0 ? static_cast<float>(mb) : in[0] + 1.0f;
      if (vs != 0 && (in[0] != in[kCount - 1] || in[0] != static_cast<float>(mb + vs - 1))) {
        throw std::runtime_error("forward input of virtual stage " + std::to_string(vs) +
                                 " micro-batch " + std::to_string(mb) + " is wrong");
      }
      if (vs == last) return;
      std::fill(out.begin(), out.end(), value);
    };
    s.backward = [&](int chunk, int mb, std::span<const float> out_grad, std::span<float> in_grad) {
      const int vs = chunk * stages + rank;
      const float expected = static_cast<float>(-mb - (last - vs - 1));
      if (vs != last && (out_grad[0] != expected || out_grad[kCount - 1] != expected)) {
        throw std::runtime_error("gradient into virtual stage " + std::to_string(vs) +
                                 " micro-batch " + std::to_string(mb) + " is wrong");
      }
      if (vs == 0) {
        ++checked;
        return;
      }
      std::fill(in_grad.begin(), in_grad.end(),
                vs == last ? static_cast<float>(-mb) : expected - 1);
    };
    run_pipeline(comm, kind, microbatches, s, virtual_stages);
  });
  EXPECT_EQ(checked.load(), microbatches);
}

TEST(PipelineRunnerLarge, InterleavedTwoStagesDoesNotDeadlock) {
  run_large(PipelineKind::Interleaved, 2, 4, 2);
}

TEST(PipelineRunnerLarge, OneFOneBFourStagesDoesNotDeadlock) {
  run_large(PipelineKind::OneFOneB, 4, 4, 1);
}

TEST(PipelineRunnerErrors, BadArgumentsThrow) {
  ccl_test::run_ranks(1, [](ccl::Communicator& comm) {
    PipelineStage s;
    s.activation_count = 1;
    s.backward = [](int, int, std::span<const float>, std::span<float>) {};
    EXPECT_THROW(run_pipeline(comm, PipelineKind::GPipe, 2, s), std::invalid_argument);
    s.forward = [](int, int, std::span<const float>, std::span<float>) {};
    EXPECT_THROW(run_pipeline(comm, PipelineKind::GPipe, 0, s), std::invalid_argument);
    EXPECT_THROW(run_pipeline(comm, PipelineKind::OneFOneB, 2, s, 2), std::invalid_argument);
    EXPECT_NO_THROW(run_pipeline(comm, PipelineKind::OneFOneB, 2, s));
  });
}

TEST(PipelineRunnerNonBlocking, WaitsForTheGroupsBeforeReusingBuffers) {
  // A non-blocking communicator returns from each group at once; the runner must wait for the
  // transfers before the next step reuses or frees the buffers.
  const Case c{PipelineKind::OneFOneB, 2, 4, 1};
  const int layers = c.stages * kLayersPerVirtualStage;
  Result pipelined{std::vector<Layer>(static_cast<size_t>(layers)), 0.0};
  std::mutex loss_mutex;
  ccl::Config config = ccl_test::test_config();
  config.blocking = false;
  ccl_test::run_ranks(
      c.stages,
      [&](ccl::Communicator& comm) {
        while (comm.async_error() == cclInProgress) std::this_thread::yield();  // init
        ModelStage model(comm.rank(), comm.size(), 1, pipelined, loss_mutex);
        run_pipeline(comm, c.kind, c.microbatches, model.stage());
      },
      config);
  const Result expected = reference(layers, c.microbatches);
  for (size_t l = 0; l < expected.grads.size(); ++l) {
    for (size_t i = 0; i < expected.grads[l].w.size(); ++i) {
      ASSERT_NEAR(pipelined.grads[l].w[i], expected.grads[l].w[i], 1e-5) << "layer " << l;
    }
  }
}

}  // namespace
