// Data-parallel training of a small MLP with ccl's training layer: the DDP reducer (buckets
// overlapping the backward pass), an optional compression hook, SGD, LAMB or LARS with linear
// warm-up. Every rank draws its own slice of each step's global batch; the loss on rank 0 is
// printed per step and a JSON line ends the run.
//
//   cclrun -np 4 build/examples/ddp_train --steps 200 --compress topk:0.01 --optim lamb
//       --batch 16 --warmup 20 --lr 0.01 --base-batch 16
//
// --no-overlap: hand the gradients to the reducer only after the whole backward pass (to measure
// what overlap gains). --base-batch N: --lr is the learning rate for N samples a step; the run
// scales it to its global batch (batch x ranks) by Goyal et al.'s linear rule. --warmup W: the rate
// rises linearly over the first W steps.
#include <ccl/ccl.hpp>
#include <ccl/training.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlp.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int steps = 100;
  std::string compress = "none";
  std::string optim = "sgd";
  int batch = 16;  // per rank
  int warmup = 0;
  double lr = 0.05;
  int width = 64;
  int depth = 2;
  int input = 32;
  double bucket_mb = 25;
  int base_batch = 0;  // 0: --lr as given
  bool error_feedback = true;
  bool overlap = true;
  bool quiet = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "ddp_train: %s\nusage: ddp_train [--steps S] [--compress none|fp16|bf16|topk:R|"
               "topk16:R|sign|onebit] [--optim sgd|lamb|lars] [--batch B] [--warmup W] [--lr LR] "
               "[--width W] [--depth D] [--bucket-mb MB] [--base-batch N] [--no-error-feedback] "
               "[--no-overlap] [--quiet]\n",
               why.c_str());
  std::exit(2);
}

int to_int(const char* flag, const char* text, int min) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < min || v > 1000000000) {
    usage(std::string(flag) + " wants an integer >= " + std::to_string(min) + ", not \"" + text +
          "\"");
  }
  return static_cast<int>(v);
}

double to_double(const char* flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (*text == '\0' || *end != '\0' || !(v > 0)) {
    usage(std::string(flag) + " wants a positive number, not \"" + text + "\"");
  }
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--steps")
      a.steps = to_int("--steps", value(), 1);
    else if (flag == "--compress")
      a.compress = value();
    else if (flag == "--optim")
      a.optim = value();
    else if (flag == "--batch")
      a.batch = to_int("--batch", value(), 1);
    else if (flag == "--warmup")
      a.warmup = to_int("--warmup", value(), 0);
    else if (flag == "--lr")
      a.lr = to_double("--lr", value());
    else if (flag == "--width")
      a.width = to_int("--width", value(), 1);
    else if (flag == "--depth")
      a.depth = to_int("--depth", value(), 1);
    else if (flag == "--bucket-mb")
      a.bucket_mb = to_double("--bucket-mb", value());
    else if (flag == "--base-batch")
      a.base_batch = to_int("--base-batch", value(), 1);
    else if (flag == "--no-error-feedback")
      a.error_feedback = false;
    else if (flag == "--no-overlap")
      a.overlap = false;
    else if (flag == "--quiet")
      a.quiet = true;
    else
      usage("unknown flag \"" + flag + "\"");
  }
  if (a.optim != "sgd" && a.optim != "lamb" && a.optim != "lars") {
    usage("--optim is sgd, lamb or lars, not \"" + a.optim + "\"");
  }
  if (a.warmup > a.steps) usage("--warmup must not exceed --steps");
  return a;
}

// A loss for the JSON line: JSON has no NaN or infinity (a run whose learning rate is too high
// diverges), so those are null.
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

ccl::training::ReducerOptions reducer_options(const Args& a) {
  ccl::training::ReducerOptions o;
  o.bucket_limits = {size_t{1} << 20, static_cast<size_t>(a.bucket_mb * (1 << 20))};
  if (a.compress == "none") {
    o.hook = ccl::training::CommHook::None;
  } else if (a.compress == "fp16") {
    o.hook = ccl::training::CommHook::Fp16;
  } else if (a.compress == "bf16") {
    o.hook = ccl::training::CommHook::Bf16;
  } else {
    o.hook = ccl::training::CommHook::Compress;
    try {
      o.compressor = ccl::training::make_compressor(a.compress);
    } catch (const std::invalid_argument& e) {
      usage(std::string("--compress: ") + e.what());
    }
    o.compressor->set_error_feedback(a.error_feedback);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    ccl::Communicator comm = ccl::Communicator::from_env();
    const int rank = comm.rank(), nranks = comm.size();
    std::vector<size_t> widths = {static_cast<size_t>(args.input)};
    for (int l = 0; l < args.depth; ++l) widths.push_back(static_cast<size_t>(args.width));
    widths.push_back(1);
    ddp_example::Mlp model(widths, 42);  // the same initial weights on every rank
    ddp_example::Task task(widths.front(), 1, 7);

    std::vector<ccl::training::TensorSpec> specs;
    for (size_t p = 0; p < model.num_params(); ++p)
      specs.push_back({model.param(p).size(), cclFloat32});
    const auto options = reducer_options(args);
    ccl::training::Reducer reducer(comm, specs, options);

    // The learning rate: linearly scaled to the global batch when --base-batch is given, reached
    // by a linear warm-up over --warmup steps, then constant.
    const size_t global_batch = static_cast<size_t>(args.batch) * static_cast<size_t>(nranks);
    const double peak = args.base_batch > 0
                            ? ccl::training::linear_scaled_lr(args.lr, global_batch,
                                                              static_cast<size_t>(args.base_batch))
                            : args.lr;
    const ccl::training::WarmupPolyDecay schedule{.peak_lr = peak,
                                                  .warmup_steps = args.warmup,
                                                  .total_steps = args.steps,
                                                  .power = 0.0,
                                                  .end_lr = peak};
    std::optional<ccl::training::Lamb> lamb;
    std::optional<ccl::training::Lars> lars;
    if (args.optim == "lamb") lamb.emplace(ccl::training::LambOptions{.lr = peak});
    if (args.optim == "lars") lars.emplace(ccl::training::LarsOptions{.lr = peak});

    const size_t in = widths.front();
    std::vector<float> x(static_cast<size_t>(args.batch) * in), y(static_cast<size_t>(args.batch));
    double loss_first = 0, loss_last = 0;
    Clock::duration compute{}, total{};
    for (int step = 0; step < args.steps; ++step) {
      const auto t0 = Clock::now();
      for (int i = 0; i < args.batch; ++i) {
        const int64_t index = static_cast<int64_t>(rank) * args.batch + i;  // global sample index
        task.sample(step, index, std::span<float>(x).subspan(static_cast<size_t>(i) * in, in),
                    std::span<float>(y).subspan(static_cast<size_t>(i), 1));
      }
      model.forward(x, static_cast<size_t>(args.batch));
      // The loss of the global batch: every rank's mean, averaged.
      std::vector<double> loss = {model.loss(y)};
      // With overlap, each gradient is handed over as the backward pass produces it; without
      // (--no-overlap, the comparison), all of them once the backward pass is over.
      std::vector<size_t> done;
      model.backward(
          y, [&](size_t p) { return reducer.grad_as<float>(p); },
          [&](size_t p) {
            if (args.overlap) {
              reducer.mark_ready(p);
            } else {
              done.push_back(p);
            }
          });
      for (size_t p : done) reducer.mark_ready(p);
      const auto t1 = Clock::now();
      reducer.wait();
      const auto t2 = Clock::now();
      const double lr = schedule(step);
      std::vector<ccl::training::ParamRef> refs;
      for (size_t p = 0; p < model.num_params(); ++p) {
        refs.push_back({model.param(p).data(), reducer.grad_as<float>(p).data(),
                        model.param(p).size(), model.is_bias(p)});
      }
      if (lamb) {
        lamb->set_lr(lr);
        lamb->step(refs);
      } else if (lars) {
        lars->set_lr(lr);
        lars->step(refs);
      } else {
        for (const auto& r : refs) {
          for (size_t j = 0; j < r.count; ++j) r.param[j] -= static_cast<float>(lr) * r.grad[j];
        }
      }
      const auto t3 = Clock::now();
      compute += (t1 - t0) + (t3 - t2);
      total += t3 - t0;
      comm.all_reduce(std::span<double>(loss), cclAvg);
      if (step == 0) loss_first = loss[0];
      loss_last = loss[0];
      if (rank == 0 && !args.quiet) std::printf("step %d loss %.6f lr %.5f\n", step, loss[0], lr);
    }

    // The loss on 512 held-out samples (a step number no training step uses): what the tests
    // compare, steadier than one step's batch.
    const int eval_n = 512;
    std::vector<float> ex(static_cast<size_t>(eval_n) * in), ey(static_cast<size_t>(eval_n));
    for (int i = 0; i < eval_n; ++i) {
      task.sample(-1, i, std::span<float>(ex).subspan(static_cast<size_t>(i) * in, in),
                  std::span<float>(ey).subspan(static_cast<size_t>(i), 1));
    }
    model.forward(ex, static_cast<size_t>(eval_n));
    const double eval_loss = model.loss(ey);

    // The same exchanges once more with nothing to overlap (every gradient marked, then wait):
    // how long communication takes when nothing hides it, to tell what the backward pass hid.
    const int probes = 5;
    Clock::duration exposed_probe{};
    {
      ccl::training::ReducerOptions probe_options = options;
      probe_options.rebuild_buckets = false;
      if (probe_options.compressor)
        probe_options.compressor = ccl::training::make_compressor(args.compress);
      ccl::training::Reducer probe(comm, specs, probe_options);
      for (int i = 0; i < probes; ++i) {
        comm.barrier();
        const auto t0 = Clock::now();
        for (size_t b = 0; b < probe.buckets().size(); ++b) {
          for (size_t p : probe.buckets()[b]) probe.mark_ready(p);
        }
        probe.wait();
        exposed_probe += Clock::now() - t0;
      }
    }
    auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    const double wait_ms = ms(reducer.wait_time()) / args.steps;
    const double comm_ms = ms(exposed_probe) / probes;
    const double overlap =
        comm_ms > 0 ? std::max(0.0, std::min(1.0, 1.0 - wait_ms / comm_ms)) : 0.0;
    if (rank == 0) {
      std::printf(
          "{\"ranks\": %d, \"steps\": %d, \"batch_per_rank\": %d, \"compress\": \"%s\", "
          "\"error_feedback\": %s, \"overlap\": %s, \"optim\": \"%s\", \"parameters\": %zu, "
          "\"buckets\": %zu, "
          "\"loss_first\": %s, \"loss\": %s, \"eval_loss\": %s, \"bytes_sent\": %llu, "
          "\"step_ms\": %.3f, "
          "\"compute_ms\": %.3f, \"exposed_comm_ms\": %.3f, \"comm_alone_ms\": %.3f, "
          "\"overlap_fraction\": %.3f}\n",
          nranks, args.steps, args.batch, args.compress.c_str(),
          args.error_feedback ? "true" : "false", args.overlap ? "true" : "false",
          args.optim.c_str(),
          [&] {
            size_t n = 0;
            for (const auto& s : specs) n += s.count;
            return n;
          }(),
          reducer.buckets().size(), json_number(loss_first).c_str(), json_number(loss_last).c_str(),
          json_number(eval_loss).c_str(), static_cast<unsigned long long>(reducer.bytes_sent()),
          ms(total) / args.steps, ms(compute) / args.steps, wait_ms, comm_ms, overlap);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_train: %s\n", e.what());
    return 1;
  }
}
