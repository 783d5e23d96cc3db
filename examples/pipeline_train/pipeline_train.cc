// Trains a small MLP with pipeline parallelism: each rank of cclrun holds a slice of the layers
// (one slice per virtual stage), micro-batches flow through them by ccl::training::run_pipeline,
// and each rank updates its own layers by SGD. The task is a synthetic regression (a fixed random
// "teacher" network), so the loss falls within a few steps.
//
//   cclrun -np 4 build/examples/pipeline_train --schedule 1f1b --microbatches 8 --steps 20
//
// The last stage prints the loss of every step and, at the end, one JSON line.
#include <ccl/ccl.hpp>
#include <ccl/training/pipeline.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using ccl::training::PipelineKind;

constexpr int kLayersPerVirtualStage = 2;
constexpr int kSamplesPerMicrobatch = 8;

struct Options {
  std::string schedule = "1f1b";
  PipelineKind kind = PipelineKind::OneFOneB;
  int virtual_stages = 0;  // 0: 2 for interleaved, else 1
  int microbatches = 8;
  int steps = 20;
  int width = 16;
  double lr = 0.5;
};

constexpr const char* kUsage =
    "usage: pipeline_train [--schedule gpipe|1f1b|interleaved] [--virtual-stages V]\n"
    "                      [--microbatches M] [--steps S] [--width W] [--lr LR]\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "pipeline_train: %s\n%s", message.c_str(), kUsage);
  std::exit(2);
}

int positive_int(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n < 1 || n > 1000000) {
    usage_error(flag + " must be a positive integer, got '" + value + "'");
  }
  return static_cast<int>(n);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    if (flag == "--help" || flag == "-h") {
      std::printf("pipeline_train: trains an MLP split over the ranks of cclrun\n%s", kUsage);
      std::exit(0);
    }
    if (const size_t eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usage_error(flag + " needs a value");
    }
    if (flag == "--schedule") {
      o.schedule = value;
      if (value == "gpipe") {
        o.kind = PipelineKind::GPipe;
      } else if (value == "1f1b") {
        o.kind = PipelineKind::OneFOneB;
      } else if (value == "interleaved") {
        o.kind = PipelineKind::Interleaved;
      } else {
        usage_error("--schedule must be gpipe, 1f1b or interleaved, got '" + value + "'");
      }
    } else if (flag == "--virtual-stages") {
      o.virtual_stages = positive_int(flag, value);
    } else if (flag == "--microbatches") {
      o.microbatches = positive_int(flag, value);
    } else if (flag == "--steps") {
      o.steps = positive_int(flag, value);
    } else if (flag == "--width") {
      o.width = positive_int(flag, value);
    } else if (flag == "--lr") {
      char* end = nullptr;
      o.lr = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(o.lr > 0.0) || !std::isfinite(o.lr)) {
        usage_error("--lr must be a positive number, got '" + value + "'");
      }
    } else {
      usage_error("unknown flag " + flag);
    }
  }
  if (o.virtual_stages == 0) o.virtual_stages = o.kind == PipelineKind::Interleaved ? 2 : 1;
  if (o.kind != PipelineKind::Interleaved && o.virtual_stages != 1) {
    usage_error("--virtual-stages must be 1 unless --schedule is interleaved");
  }
  return o;
}

// Deterministic uniform values in [-1, 1): every rank makes the same weights and data.
float uniform(unsigned long long seed) {
  seed += 0x9e3779b97f4a7c15ull;
  seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
  seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
  seed ^= seed >> 31;
  return static_cast<float>(seed >> 40) / static_cast<float>(1ull << 23) - 1.0f;
}

// A dense layer of width n: y = x + tanh(W x + b) (residual, so the deep chain trains), or
// y = W x + b for the model's last layer.
struct Layer {
  int n = 0;
  bool linear = false;
  std::vector<float> w, b, dw, db;

  Layer(int width, bool is_linear, unsigned long long seed)
      : n(width), linear(is_linear), w(static_cast<size_t>(n) * n), b(n), dw(w.size()), db(n) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(n));
    for (size_t i = 0; i < w.size(); ++i) w[i] = scale * uniform(seed * 1000003ull + i);
  }

  // x: samples × n. Returns the output; `z` keeps tanh(W x + b) for the backward.
  std::vector<float> forward(const std::vector<float>& x, std::vector<float>& z) const {
    const size_t samples = x.size() / n;
    std::vector<float> y(x.size());
    z.assign(x.size(), 0.0f);
    for (size_t s = 0; s < samples; ++s) {
      for (int o = 0; o < n; ++o) {
        float a = b[o];
        for (int i = 0; i < n; ++i) a += w[o * n + i] * x[s * n + i];
        z[s * n + o] = linear ? a : std::tanh(a);
        y[s * n + o] = linear ? a : x[s * n + o] + z[s * n + o];
      }
    }
    return y;
  }

  // Adds the gradients of W and b; returns dL/dx.
  std::vector<float> backward(const std::vector<float>& x, const std::vector<float>& z,
                              const std::vector<float>& dy) {
    const size_t samples = x.size() / n;
    std::vector<float> dx(x.size(), 0.0f);
    for (size_t s = 0; s < samples; ++s) {
      for (int o = 0; o < n; ++o) {
        const float g = dy[s * n + o];
        const float da = linear ? g : g * (1.0f - z[s * n + o] * z[s * n + o]);
        if (!linear) dx[s * n + o] += g;  // the residual path
        db[o] += da;
        for (int i = 0; i < n; ++i) {
          dw[o * n + i] += da * x[s * n + i];
          dx[s * n + i] += da * w[o * n + i];
        }
      }
    }
    return dx;
  }

  void sgd(float lr) {
    for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * std::exchange(dw[i], 0.0f);
    for (int i = 0; i < n; ++i) b[i] -= lr * std::exchange(db[i], 0.0f);
  }
};

// The data of micro-batch `mb` of step `step`: inputs, and the teacher's targets.
struct Batch {
  std::vector<float> x, t;
};

Batch make_batch(int width, int step, int mb) {
  const size_t count = static_cast<size_t>(kSamplesPerMicrobatch) * width;
  Batch batch{std::vector<float>(count), std::vector<float>(count)};
  const unsigned long long base =
      (static_cast<unsigned long long>(step) << 40) + (static_cast<unsigned long long>(mb) << 20);
  for (size_t i = 0; i < count; ++i) batch.x[i] = uniform(base + i);
  // Teacher: t = 0.5 tanh(A x), A fixed.
  const float scale = 2.0f / std::sqrt(static_cast<float>(width));
  for (int s = 0; s < kSamplesPerMicrobatch; ++s) {
    for (int o = 0; o < width; ++o) {
      float a = 0.0f;
      for (int i = 0; i < width; ++i) {
        a += scale * uniform(0xabcdef00000ull + o * width + i) * batch.x[s * width + i];
      }
      batch.t[s * width + o] = 0.5f * std::tanh(a);
    }
  }
  return batch;
}

// This rank's layers and what their backward needs, per (chunk, micro-batch).
class Stage {
 public:
  Stage(const Options& o, int rank, int stages)
      : o_(o), rank_(rank), stages_(stages), last_(stages * o.virtual_stages - 1) {
    for (int c = 0; c < o.virtual_stages; ++c) {
      for (int l = 0; l < kLayersPerVirtualStage; ++l) {
        const int global = (c * stages + rank) * kLayersPerVirtualStage + l;
        const bool final_layer = global == (last_ + 1) * kLayersPerVirtualStage - 1;
        layers_.emplace_back(o.width, final_layer, static_cast<unsigned long long>(global) + 1);
      }
    }
  }

  ccl::training::PipelineStage stage() {
    ccl::training::PipelineStage s;
    s.activation_count = static_cast<size_t>(kSamplesPerMicrobatch) * o_.width;
    s.forward = [this](int chunk, int mb, std::span<const float> in, std::span<float> out) {
      forward(chunk, mb, in, out);
    };
    s.backward = [this](int chunk, int mb, std::span<const float> out_grad,
                        std::span<float> in_grad) { backward(chunk, mb, out_grad, in_grad); };
    return s;
  }

  void start_step(int step) {
    step_ = step;
    loss_ = 0.0;
  }
  double loss() const { return loss_; }
  bool is_last() const { return rank_ == last_ % stages_; }

  void sgd() {
    for (Layer& layer : layers_) layer.sgd(static_cast<float>(o_.lr));
  }

 private:
  struct Saved {
    std::vector<std::vector<float>> x, z;  // each layer's input and tanh
  };

  Layer& layer(int chunk, int l) {
    return layers_[static_cast<size_t>(chunk * kLayersPerVirtualStage + l)];
  }

  void forward(int chunk, int mb, std::span<const float> in, std::span<float> out) {
    const int vs = chunk * stages_ + rank_;
    std::vector<float> x =
        vs == 0 ? make_batch(o_.width, step_, mb).x : std::vector<float>(in.begin(), in.end());
    Saved& saved = saved_[{chunk, mb}];
    for (int l = 0; l < kLayersPerVirtualStage; ++l) {
      saved.z.emplace_back();
      saved.x.push_back(x);
      x = layer(chunk, l).forward(x, saved.z.back());
    }
    if (vs == last_) {
      saved.x.push_back(std::move(x));  // the prediction, for the loss
    } else {
      std::copy(x.begin(), x.end(), out.begin());
    }
  }

  void backward(int chunk, int mb, std::span<const float> out_grad, std::span<float> in_grad) {
    const int vs = chunk * stages_ + rank_;
    auto found = saved_.find({chunk, mb});
    Saved saved = std::move(found->second);
    saved_.erase(found);
    std::vector<float> dy;
    if (vs == last_) {
      // Loss: the mean over the step's samples and outputs of 0.5 (y - t)².
      const std::vector<float> t = make_batch(o_.width, step_, mb).t;
      const std::vector<float>& y = saved.x.back();
      const double norm = 1.0 / (static_cast<double>(t.size()) * o_.microbatches);
      dy.resize(t.size());
      for (size_t i = 0; i < t.size(); ++i) {
        const float e = y[i] - t[i];
        loss_ += 0.5 * e * e * norm;
        dy[i] = static_cast<float>(e * norm);
      }
    } else {
      dy.assign(out_grad.begin(), out_grad.end());
    }
    for (int l = kLayersPerVirtualStage - 1; l >= 0; --l) {
      dy = layer(chunk, l).backward(saved.x[static_cast<size_t>(l)],
                                    saved.z[static_cast<size_t>(l)], dy);
    }
    if (vs != 0) std::copy(dy.begin(), dy.end(), in_grad.begin());
  }

  const Options& o_;
  const int rank_;
  const int stages_;
  const int last_;
  std::vector<Layer> layers_;  // chunk-major
  std::map<std::pair<int, int>, Saved> saved_;
  int step_ = 0;
  double loss_ = 0.0;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    ccl::Communicator comm = ccl::Communicator::from_env();
    const int rank = comm.rank();
    const int stages = comm.size();
    if (o.kind == PipelineKind::Interleaved && o.microbatches % stages != 0) {
      if (rank == 0) {
        usage_error("--microbatches must be a multiple of the number of ranks (" +
                    std::to_string(stages) + ") for --schedule interleaved");
      }
      return 2;
    }

    Stage stage(o, rank, stages);
    const ccl::training::PipelineStage functions = stage.stage();
    double loss_first = 0.0, loss_last = 0.0, total_ms = 0.0;
    for (int step = 0; step < o.steps; ++step) {
      stage.start_step(step);
      const auto start = std::chrono::steady_clock::now();
      ccl::training::run_pipeline(comm, o.kind, o.microbatches, functions, o.virtual_stages);
      stage.sgd();
      total_ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (stage.is_last()) {
        if (step == 0) loss_first = stage.loss();
        loss_last = stage.loss();
        std::printf("step %d loss %.6f\n", step, stage.loss());
        std::fflush(stdout);
      }
    }
    if (stage.is_last()) {
      std::printf(
          "{\"schedule\":\"%s\",\"stages\":%d,\"virtual_stages\":%d,\"microbatches\":%d,"
          "\"steps\":%d,\"width\":%d,\"loss_first\":%.6g,\"loss_last\":%.6g,"
          "\"bubble_closed_form\":%.6g,\"step_ms\":%.4g}\n",
          o.schedule.c_str(), stages, o.virtual_stages, o.microbatches, o.steps, o.width,
          loss_first, loss_last,
          ccl::training::pipeline_bubble_closed_form(o.kind, stages, o.microbatches,
                                                     o.virtual_stages),
          total_ms / o.steps);
    }
    return 0;
  } catch (const ccl::Error& e) {
    std::fprintf(stderr, "pipeline_train: ccl error %d: %s\n", static_cast<int>(e.code()),
                 e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_train: %s\n", e.what());
  }
  return 1;
}
