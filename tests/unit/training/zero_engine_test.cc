// The ZeRO engine at 1 to 4 ranks (threads): each stage, with each optimizer, ends where plain DDP
// ends on the same steps; 16-bit precisions stay close and keep 16-bit working copies; memory is
// the stage's share; stage 3 prefetches the next unit; misuse is refused with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>

#include "../support/rank_threads.h"
#include "zero_model.h"

namespace {

using namespace zero_test;

void expect_close(const std::vector<std::vector<float>>& a,
                  const std::vector<std::vector<float>>& b, float atol, float rtol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t k = 0; k < a[i].size(); ++k) {
      ASSERT_NEAR(a[i][k], b[i][k], atol + rtol * std::fabs(b[i][k]))
          << what << ": parameter " << i << " element " << k;
    }
  }
}

using Case = std::tuple<int, Opt, int>;  // stage, optimizer, ranks

class ZeroVsDdp : public testing::TestWithParam<Case> {};

TEST_P(ZeroVsDdp, SameParametersAfterThreeSteps) {
  const auto [stage, opt, nranks] = GetParam();
  ccl_test::run_ranks(nranks, [&](ccl::Communicator& comm) {
    const auto ddp = run_ddp(comm, opt, 3);
    const auto zero = run_zero(comm, opt, {.stage = stage}, 3);
    // Only the order of float sums differs (reduce-scatter against all-reduce, norms in pieces).
    expect_close(zero, ddp, 1e-6f, 2e-5f, "rank " + std::to_string(comm.rank()));
  });
}

INSTANTIATE_TEST_SUITE_P(StagesOptimizersRanks, ZeroVsDdp,
                         testing::Combine(testing::Values(1, 2, 3),
                                          testing::Values(Opt::Sgd, Opt::Adam, Opt::Lamb,
                                                          Opt::Lars),
                                          testing::Values(2, 3)),
                         [](const testing::TestParamInfo<Case>& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) + "_" +
                                  opt_name(std::get<1>(info.param)) + "_" +
                                  std::to_string(std::get<2>(info.param)) + "ranks";
                         });

TEST(Zero, OneRankIsTheWholeStep) {
  ccl_test::run_ranks(1, [](ccl::Communicator& comm) {
    expect_close(run_zero(comm, Opt::Lamb, {.stage = 3}, 2), run_ddp(comm, Opt::Lamb, 2), 1e-7f,
                 1e-6f, "one rank");
  });
}

bool is_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return (bits & 0xffffu) == 0;
}

TEST(Zero, SixteenBitPrecisionsStayCloseWithFloatMasters) {
  for (const ZeroPrecision precision : {ZeroPrecision::Bf16, ZeroPrecision::Fp16}) {
    for (const int stage : {1, 2, 3}) {
      ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
        const auto ddp = run_ddp(comm, Opt::Adam, 3);
        Zero zero(comm, model(), make_optimizer(Opt::Adam),
                  {.stage = stage, .precision = precision});
        load_initial(zero);
        for (int s = 0; s < 3; ++s) zero_iteration(zero, comm.rank());
        // The working copy is what travelled: bf16 values; the master keeps float32 bits.
        zero.gather(0);
        if (precision == ZeroPrecision::Bf16) {
          for (float v : zero.param(1)) EXPECT_TRUE(is_bf16(v)) << v;
        }
        zero.release(0);
        const auto full = full_params(zero);
        bool some_master_bits = false;
        for (float v : full[1]) some_master_bits = some_master_bits || !is_bf16(v);
        EXPECT_TRUE(some_master_bits);
        expect_close(full, ddp, 2e-2f, 2e-2f,
                     std::string(precision == ZeroPrecision::Bf16 ? "bf16" : "fp16") + " stage " +
                         std::to_string(stage));
        EXPECT_GT(zero.memory().master, 0u);
      });
    }
  }
}

size_t total_count() {
  size_t n = 0;
  for (const ZeroParam& p : model()) n += p.count;
  return n;
}

TEST(Zero, MemoryIsTheStagesShare) {
  constexpr int kRanks = 4;
  ccl_test::run_ranks(kRanks, [](ccl::Communicator& comm) {
    for (const int stage : {1, 2, 3}) {
      Zero zero(comm, model(), make_optimizer(Opt::Adam), {.stage = stage});
      load_initial(zero);
      zero_iteration(zero, comm.rank());
      size_t padded = 0;
      size_t slices = 0;
      for (const ZeroUnitLayout& u : zero.units()) {
        padded += u.shard * kRanks;
        slices += u.shard;
      }
      const ZeroMemory m = zero.memory();
      // Adam holds two moments for this rank's elements only: about 2/N of the whole.
      EXPECT_LE(m.optimizer, 2 * slices * sizeof(float));
      EXPECT_GT(m.optimizer, 0u);
      if (stage == 1) {
        EXPECT_EQ(m.parameters, padded * sizeof(float));
        EXPECT_EQ(m.gradients, padded * sizeof(float));  // whole; the slice reduced in place
        EXPECT_EQ(m.master, 0u);  // the working copy's own slice is the master
      } else if (stage == 2) {
        EXPECT_EQ(m.parameters, padded * sizeof(float));
        EXPECT_EQ(m.gradients, slices * sizeof(float));
        // The slices, and whole gradients of at most two units in flight and one being written.
        size_t largest = 0;
        for (const ZeroUnitLayout& u : zero.units()) largest = std::max(largest, u.shard * kRanks);
        EXPECT_LE(zero.peak_memory().gradients, (slices + 3 * largest) * sizeof(float));
      } else {
        EXPECT_EQ(m.parameters, 0u);
        EXPECT_EQ(m.master, slices * sizeof(float));
        EXPECT_EQ(m.gradients, slices * sizeof(float));
        // At its peak stage 3 held one unit gathered and one prefetched, and the whole gradients
        // of at most two units (one being written, one in flight): never the whole model.
        size_t largest = 0;
        for (const ZeroUnitLayout& u : zero.units()) largest = std::max(largest, u.shard * kRanks);
        const ZeroMemory peak = zero.peak_memory();
        EXPECT_LE(peak.parameters, 2 * largest * sizeof(float));
        EXPECT_LE(peak.gradients, (slices + 2 * largest) * sizeof(float));
        EXPECT_LT(peak.parameters, padded * sizeof(float));
      }
      EXPECT_GE(total_count(), 3 * slices);  // the model is 4 slices, padded
    }
  });
}

TEST(Zero, StageThreePrefetchesTheNextUnitOfTheLastIteration) {
  for (const int prefetch : {0, 1, 2}) {
    ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
      Zero zero(comm, model(), make_optimizer(Opt::Sgd), {.stage = 3, .prefetch = prefetch});
      load_initial(zero);
      zero_iteration(zero, comm.rank());  // the first iteration records the order
      zero.gather(0);
      size_t expected = 0;
      for (int u = 0; u <= prefetch; ++u) {
        expected += zero.units()[static_cast<size_t>(u)].shard * 2 * sizeof(float);
      }
      EXPECT_EQ(zero.memory().parameters, expected) << "prefetch " << prefetch;
      zero.release(0);
      for (size_t u = 1; u < zero.units().size(); ++u) {
        zero.gather(u);
        zero.release(u);
      }
      for (size_t u = zero.units().size(); u-- > 0;) {
        zero.gather(u);
        for (size_t i = 0; i < model().size(); ++i) {
          if (model()[i].unit != u) continue;
          gradient(comm.rank(), i, zero.param(i), zero.grad(i));
          zero.mark_ready(i);
        }
        zero.release(u);
      }
      zero.step();
      EXPECT_EQ(zero.memory().parameters, 0u);
    });
  }
}

template <class E>
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

TEST(Zero, MisuseIsRefusedWithAMessage) {
  ccl_test::run_ranks(2, [](ccl::Communicator& comm) {
    EXPECT_NE(message_of<std::invalid_argument>([&] {
                Zero z(comm, model(), make_optimizer(Opt::Sgd), {.stage = 4});
              }).find("stage 4 must be 1, 2 or 3"),
              std::string::npos);
    EXPECT_NE(message_of<std::invalid_argument>([&] {
                Zero z(comm, model(), nullptr, {});
              }).find("optimizer is null"),
              std::string::npos);
    EXPECT_NE(message_of<std::invalid_argument>([&] {
                Zero z(comm, model(), make_optimizer(Opt::Sgd), {.reductions_in_flight = 0});
              }).find("reductions_in_flight 0 must be at least 1"),
              std::string::npos);
    EXPECT_NE(message_of<std::invalid_argument>([&] {
                Zero z(comm, model(), make_optimizer(Opt::Sgd), {.prefetch = -1});
              }).find("prefetch -1"),
              std::string::npos);
    Zero zero(comm, model(), make_optimizer(Opt::Sgd), {.stage = 3});
    load_initial(zero);
    EXPECT_NE(message_of<std::logic_error>([&] {
                (void)zero.param(2);
              }).find("parameter 2 (unit 1) is not gathered: call gather(1) first"),
              std::string::npos);
    EXPECT_THROW(zero.gather(3), std::out_of_range);
    EXPECT_THROW(zero.mark_ready(6), std::out_of_range);
    EXPECT_THROW(zero.load_full(0, std::vector<float>(3)), std::invalid_argument);
    zero.mark_ready(5);
    EXPECT_THROW(zero.mark_ready(5), std::logic_error);
    EXPECT_THROW((void)zero.grad(5), std::logic_error);
    EXPECT_NE(message_of<std::logic_error>([&] {
                zero.step();
              }).find("parameters not marked ready: 0, 1, 2, 3"),
              std::string::npos);
    // The engine still works once the iteration is completed alike on every rank.
    for (size_t i = 0; i < 5; ++i) zero.mark_ready(i);
    zero.step();
  });
}

}  // namespace
