// ZeRO against plain DDP on one model: per-rank memory of parameters, gradients and optimizer state
// (each kind at the moment the total peaked) and the step time, for the scaling efficiency
// throughput(N) / (N · throughput(1)) that perf/training/zero_bench.py tabulates. Run under cclrun:
//
//   cclrun -np 4 build/perf/zero_bench --mode zero3 --width 512 --layers 8 --batch 16 --steps 10
//
// The model: `layers` dense layers of width × width weights and a bias, tanh between them, a
// squared-error loss against a fixed target; each layer is one ZeRO unit. Every rank draws its own
// samples (weak scaling: the batch per rank is fixed). Adam. Prints one JSON line (rank 0).
#include <ccl/ccl.hpp>
#include <ccl/training.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace ccl::training;

struct Args {
  std::string mode = "zero3";  // ddp, zero1, zero2, zero3
  std::string precision = "fp32";
  int width = 512;
  int layers = 8;
  int batch = 16;
  int steps = 10;
  int warmup = 2;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "zero_bench: %s\nusage: zero_bench [--mode ddp|zero1|zero2|zero3] "
               "[--precision fp32|bf16|fp16] [--width W] [--layers L] [--batch B] [--steps S] "
               "[--warmup S]\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    const char* v = argv[++i];
    auto number = [&](int min) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || n < min || n > 1 << 20) {
        usage(flag + " wants an integer >= " + std::to_string(min) + ", not \"" + v + "\"");
      }
      return static_cast<int>(n);
    };
    if (flag == "--mode") {
      a.mode = v;
    } else if (flag == "--precision") {
      a.precision = v;
    } else if (flag == "--width") {
      a.width = number(1);
    } else if (flag == "--layers") {
      a.layers = number(1);
    } else if (flag == "--batch") {
      a.batch = number(1);
    } else if (flag == "--steps") {
      a.steps = number(1);
    } else if (flag == "--warmup") {
      a.warmup = number(0);
    } else {
      usage("unknown flag \"" + flag + "\"");
    }
  }
  if (a.mode != "ddp" && a.mode != "zero1" && a.mode != "zero2" && a.mode != "zero3") {
    usage("--mode is ddp, zero1, zero2 or zero3, not \"" + a.mode + "\"");
  }
  if (a.precision != "fp32" && a.precision != "bf16" && a.precision != "fp16") {
    usage("--precision is fp32, bf16 or fp16, not \"" + a.precision + "\"");
  }
  return a;
}

// What a model needs from its trainer: each parameter's values and gradient, and a signal per
// layer before its forward, after it, before its backward and after it (ZeRO-3 gathers and
// releases there; DDP needs none of it).
struct Trainer {
  virtual ~Trainer() = default;
  virtual void before(size_t layer) = 0;
  virtual void after(size_t layer) = 0;
  virtual std::span<float> param(size_t i) = 0;
  virtual std::span<float> grad(size_t i) = 0;
  virtual void ready(size_t i) = 0;
  virtual void step() = 0;
  virtual ZeroMemory peak() = 0;
};

class DdpTrainer : public Trainer {
 public:
  DdpTrainer(ccl::Communicator& comm, const std::vector<ZeroParam>& params,
             const std::vector<std::vector<float>>& initial)
      : values_(initial), optimizer_(AdamOptions{.lr = 1e-3}) {
    std::vector<TensorSpec> specs;
    for (const ZeroParam& p : params) specs.push_back({p.count, cclFloat32});
    reducer_ = std::make_unique<Reducer>(comm, specs);
    for (const ZeroParam& p : params) param_bytes_ += p.count * sizeof(float);
  }
  void before(size_t) override {}
  void after(size_t) override {}
  std::span<float> param(size_t i) override { return values_[i]; }
  std::span<float> grad(size_t i) override { return reducer_->grad_as<float>(i); }
  void ready(size_t i) override { reducer_->mark_ready(i); }
  void step() override {
    reducer_->wait();
    std::vector<ParamRef> refs;
    for (size_t i = 0; i < values_.size(); ++i) {
      refs.push_back({values_[i].data(), reducer_->grad_as<float>(i).data(), values_[i].size()});
    }
    optimizer_.step(refs);
    reducer_->zero_grad();
  }
  // The whole model, its whole gradient (the reducer's buckets) and the whole optimizer state.
  ZeroMemory peak() override {
    return {.parameters = param_bytes_,
            .gradients = param_bytes_,
            .optimizer = optimizer_.state_bytes()};
  }

 private:
  std::vector<std::vector<float>> values_;
  std::unique_ptr<Reducer> reducer_;
  Adam optimizer_;
  size_t param_bytes_ = 0;
};

class ZeroTrainer : public Trainer {
 public:
  ZeroTrainer(ccl::Communicator& comm, const std::vector<ZeroParam>& params,
              const std::vector<std::vector<float>>& initial, int stage, ZeroPrecision precision)
      : zero_(comm, params, std::make_unique<Adam>(AdamOptions{.lr = 1e-3}),
              {.stage = stage, .precision = precision}) {
    for (size_t i = 0; i < params.size(); ++i) zero_.load_full(i, initial[i]);
    zero_.reset_peak_memory();
  }
  void before(size_t layer) override { zero_.gather(layer); }
  void after(size_t layer) override { zero_.release(layer); }
  std::span<float> param(size_t i) override { return zero_.param(i); }
  std::span<float> grad(size_t i) override { return zero_.grad(i); }
  void ready(size_t i) override { zero_.mark_ready(i); }
  void step() override { zero_.step(); }
  ZeroMemory peak() override { return zero_.peak_memory(); }

 private:
  Zero zero_;
};

// One step of the model: forward through the layers, squared error against the target, backward
// handing each layer's gradients over as soon as they are computed.
void train_step(Trainer& t, const Args& a, const std::vector<float>& input,
                const std::vector<float>& target) {
  const size_t w = static_cast<size_t>(a.width);
  const size_t b = static_cast<size_t>(a.batch);
  const size_t layers = static_cast<size_t>(a.layers);
  std::vector<std::vector<float>> acts(layers + 1);
  acts[0] = input;
  for (size_t l = 0; l < layers; ++l) {
    t.before(l);
    const std::span<const float> weight = t.param(2 * l);
    const std::span<const float> bias = t.param(2 * l + 1);
    acts[l + 1].assign(b * w, 0.0f);
    for (size_t s = 0; s < b; ++s) {
      const float* x = acts[l].data() + s * w;
      float* y = acts[l + 1].data() + s * w;
      for (size_t o = 0; o < w; ++o) {
        float sum = bias[o];
        const float* row = weight.data() + o * w;
        for (size_t k = 0; k < w; ++k) sum += row[k] * x[k];
        y[o] = std::tanh(sum);
      }
    }
    t.after(l);
  }
  std::vector<float> delta(b * w);  // d loss / d pre-activation of the current layer
  for (size_t j = 0; j < b * w; ++j) {
    const float y = acts[layers][j];
    delta[j] = (y - target[j]) * (1.0f - y * y) / static_cast<float>(b);
  }
  for (size_t l = layers; l-- > 0;) {
    t.before(l);
    std::span<float> gw = t.grad(2 * l);
    std::span<float> gb = t.grad(2 * l + 1);
    for (size_t s = 0; s < b; ++s) {
      const float* x = acts[l].data() + s * w;
      const float* d = delta.data() + s * w;
      for (size_t o = 0; o < w; ++o) {
        float* row = gw.data() + o * w;
        for (size_t k = 0; k < w; ++k) row[k] += d[o] * x[k];
        gb[o] += d[o];
      }
    }
    if (l > 0) {  // the delta of the layer below, through this layer's weights and tanh
      const std::span<const float> weight = t.param(2 * l);
      std::vector<float> below(b * w, 0.0f);
      for (size_t s = 0; s < b; ++s) {
        const float* d = delta.data() + s * w;
        float* out = below.data() + s * w;
        for (size_t o = 0; o < w; ++o) {
          const float* row = weight.data() + o * w;
          for (size_t k = 0; k < w; ++k) out[k] += d[o] * row[k];
        }
        const float* x = acts[l].data() + s * w;
        for (size_t k = 0; k < w; ++k) out[k] *= 1.0f - x[k] * x[k];
      }
      delta.swap(below);
    }
    t.ready(2 * l + 1);
    t.ready(2 * l);
    t.after(l);
  }
  t.step();
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    ccl::Communicator comm = ccl::Communicator::from_env();
    const size_t w = static_cast<size_t>(args.width);
    std::vector<ZeroParam> params;
    std::vector<std::vector<float>> initial;
    std::mt19937 gen(42);  // the same initial weights on every rank
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(w)));
    for (size_t l = 0; l < static_cast<size_t>(args.layers); ++l) {
      params.push_back({w * w, false, l});
      params.push_back({w, true, l});
      initial.emplace_back(w * w);
      for (float& v : initial.back()) v = normal(gen);
      initial.emplace_back(w, 0.0f);
    }
    size_t count = 0;
    for (const ZeroParam& p : params) count += p.count;

    std::unique_ptr<Trainer> trainer;
    if (args.mode == "ddp") {
      trainer = std::make_unique<DdpTrainer>(comm, params, initial);
    } else {
      const ZeroPrecision precision = args.precision == "bf16"   ? ZeroPrecision::Bf16
                                      : args.precision == "fp16" ? ZeroPrecision::Fp16
                                                                 : ZeroPrecision::Fp32;
      trainer =
          std::make_unique<ZeroTrainer>(comm, params, initial, args.mode.back() - '0', precision);
    }
    initial.clear();
    initial.shrink_to_fit();

    std::mt19937 data(1000 + static_cast<unsigned>(comm.rank()));
    std::normal_distribution<float> unit(0.0f, 1.0f);
    std::vector<float> input(static_cast<size_t>(args.batch) * w), target(input.size());
    for (float& v : input) v = unit(data);
    for (float& v : target) v = 0.5f * std::tanh(unit(data));

    Clock::duration measured{};
    for (int s = 0; s < args.warmup + args.steps; ++s) {
      comm.barrier();
      const auto t0 = Clock::now();
      train_step(*trainer, args, input, target);
      if (s >= args.warmup) measured += Clock::now() - t0;
    }
    // The slowest rank's time is the step's.
    std::vector<double> step_ms = {std::chrono::duration<double, std::milli>(measured).count() /
                                   args.steps};
    comm.all_reduce(std::span<double>(step_ms), cclMax);
    const ZeroMemory m = trainer->peak();
    if (comm.rank() == 0) {
      const double samples_per_s = 1e3 * args.batch * comm.size() / step_ms[0];
      std::printf(
          "{\"ranks\": %d, \"mode\": \"%s\", \"precision\": \"%s\", \"parameters\": %zu, "
          "\"width\": %d, \"layers\": %d, \"batch_per_rank\": %d, \"step_ms\": %.3f, "
          "\"samples_per_s\": %.1f, \"peak_parameters\": %zu, \"peak_master\": %zu, "
          "\"peak_gradients\": %zu, \"peak_optimizer\": %zu, \"peak_total\": %zu}\n",
          comm.size(), args.mode.c_str(), args.precision.c_str(), count, args.width, args.layers,
          args.batch, step_ms[0], samples_per_s, m.parameters, m.master, m.gradients, m.optimizer,
          m.total());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zero_bench: %s\n", e.what());
    return 1;
  }
}
