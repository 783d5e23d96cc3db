// Optimizer::save_state / load_state (include/ccl/training/optim.hpp): a new optimizer that loads
// the state continues exactly as the original (for all four, at other addresses), refs saved
// absent, and the refusals of blobs that do not fit, which leave the optimizer as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ccl/training/optim.hpp"
#include "optim_testing.h"

namespace {

using namespace ccl::training;
using ccl_test::contains;
using ccl_test::invalid_argument_of;
using ccl_test::random_tensor;
using ccl_test::starts_with;

struct Kind {
  const char* name;
  const char* prefix;
  std::function<std::unique_ptr<Optimizer>()> make;
};

std::vector<Kind> kinds() {
  return {
      {"sgd", "ccl::training::Sgd: ",
       [] { return std::make_unique<Sgd>(SgdOptions{.lr = 0.1, .momentum = 0.9}); }},
      {"adam", "ccl::training::Adam: ",
       [] {
         return std::make_unique<Adam>(
             AdamOptions{.lr = 0.01, .weight_decay = 0.1, .decoupled = true});
       }},
      {"lamb", "ccl::training::Lamb: ",
       [] { return std::make_unique<Lamb>(LambOptions{.lr = 0.05, .weight_decay = 0.1}); }},
      {"lars", "ccl::training::Lars: ",
       [] { return std::make_unique<Lars>(LarsOptions{.lr = 0.5, .trust_coefficient = 0.02}); }},
  };
}

// Parameters and their gradients, with refs onto them.
struct Params {
  std::vector<std::vector<float>> x, g;
  std::vector<ParamRef> refs() {
    std::vector<ParamRef> r;
    for (size_t i = 0; i < x.size(); ++i) {
      r.push_back(
          {.param = x[i].data(), .grad = g[i].data(), .count = x[i].size(), .exclude = i == 2});
    }
    return r;
  }
};

Params params(std::mt19937& rng) {
  Params p;
  for (size_t n : {37, 12, 5}) {
    p.x.push_back(random_tensor(rng, n, 0.1f, 1.0f));
    p.g.push_back(std::vector<float>(n));
  }
  return p;
}

void new_gradients(std::mt19937& rng, Params& a, Params& b) {
  for (size_t i = 0; i < a.g.size(); ++i) {
    a.g[i] = random_tensor(rng, a.g[i].size(), 0.1f, 1.0f);
    b.g[i] = a.g[i];
  }
}

TEST(OptimizerState, ALoadedOptimizerContinuesExactlyAsTheOriginal) {
  for (const Kind& kind : kinds()) {
    SCOPED_TRACE(kind.name);
    std::mt19937 rng(9);
    Params original = params(rng);
    Params copy = original;  // other addresses, the same values
    auto first = kind.make();
    for (int s = 0; s < 2; ++s) {
      new_gradients(rng, original, copy);
      first->step(original.refs());
    }
    const std::vector<char> blob = first->save_state(original.refs());
    copy.x = original.x;
    auto second = kind.make();
    second->load_state(copy.refs(), blob);
    EXPECT_EQ(second->steps(), 2);
    EXPECT_EQ(second->state_bytes(), first->state_bytes());
    for (int s = 0; s < 3; ++s) {
      new_gradients(rng, original, copy);
      first->step(original.refs());
      second->step(copy.refs());
      EXPECT_EQ(copy.x, original.x) << "step " << s;
    }
    EXPECT_EQ(second->steps(), 5);
    // The blob names its kind after the magic word and version.
    EXPECT_EQ(std::memcmp(blob.data(), "CCLOPTIM", 8), 0);
    EXPECT_TRUE(contains(std::string(blob.begin(), blob.end()), kind.name));
  }
}

TEST(OptimizerState, RefsWithoutStateSaveAsAbsentAndLoadAsFresh) {
  std::mt19937 rng(4);
  Params p = params(rng);
  new_gradients(rng, p, p);
  Params q = p;
  const auto p_refs = p.refs();
  Adam adam(AdamOptions{.lr = 0.01});
  adam.step(std::span(p_refs).first(1));  // only the first has state
  const std::vector<char> blob = adam.save_state(p_refs);

  // Loading into an optimizer that holds state for the other two clears it: they start afresh.
  Adam other(AdamOptions{.lr = 0.01});
  other.step(q.refs());
  other.step(q.refs());
  other.load_state(q.refs(), blob);
  EXPECT_EQ(other.steps(), 1);
  EXPECT_EQ(other.state_bytes(), adam.state_bytes());
  q.x = p.x;
  adam.step(p_refs);
  other.step(q.refs());
  EXPECT_EQ(p.x, q.x);
}

TEST(OptimizerState, RefusesABlobThatDoesNotFit) {
  std::mt19937 rng(2);
  Params p = params(rng);
  new_gradients(rng, p, p);
  const auto refs = p.refs();
  Adam adam(AdamOptions{});
  adam.step(refs);
  const std::vector<char> blob = adam.save_state(refs);

  // The optimizer that refuses must be left as it was: one step, its own state.
  Lamb lamb(LambOptions{});
  lamb.step(refs);
  const size_t bytes = lamb.state_bytes();
  const auto refused = [&](Optimizer& o, std::span<const ParamRef> r, std::span<const char> b) {
    return invalid_argument_of([&] { o.load_state(r, b); });
  };

  std::string m = refused(lamb, refs, blob);
  EXPECT_TRUE(starts_with(m, "ccl::training::Lamb: load_state: ")) << m;
  EXPECT_TRUE(contains(m, "adam") && contains(m, "lamb")) << m;

  Adam fresh(AdamOptions{});
  m = refused(fresh, std::span(refs).first(2), blob);
  EXPECT_TRUE(contains(m, "holds 3 refs, but 2 were given")) << m;

  std::vector<ParamRef> longer = refs;
  longer[1].count += 1;
  m = refused(fresh, longer, blob);
  EXPECT_TRUE(contains(m, "ref 1 (count 13)") && contains(m, "count 12")) << m;

  // SGD without momentum keeps no buffer; one with momentum saved one.
  Sgd momentum(SgdOptions{.momentum = 0.9}), plain(SgdOptions{});
  momentum.step(refs);
  m = refused(plain, refs, momentum.save_state(refs));
  EXPECT_TRUE(contains(m, "1 buffers per element, this sgd keeps 0")) << m;

  const std::vector<char> junk(40, 'x');
  m = refused(fresh, refs, junk);
  EXPECT_TRUE(contains(m, "not an optimizer state")) << m;
  m = refused(fresh, refs, std::span(blob).first(blob.size() - 3));
  EXPECT_TRUE(contains(m, "truncated")) << m;
  std::vector<char> trailing = blob;
  trailing.push_back(0);
  m = refused(fresh, refs, trailing);
  EXPECT_TRUE(contains(m, "1 bytes follow the state's end")) << m;
  std::vector<char> version = blob;
  version[8] = 7;  // the u32 after the magic word
  m = refused(fresh, refs, version);
  EXPECT_TRUE(contains(m, "version 7")) << m;

  EXPECT_EQ(lamb.steps(), 1);
  EXPECT_EQ(lamb.state_bytes(), bytes);
  EXPECT_EQ(fresh.steps(), 0);
  EXPECT_EQ(fresh.state_bytes(), 0u);
  EXPECT_NO_THROW(fresh.load_state(refs, blob));
  EXPECT_EQ(fresh.steps(), 1);
}

TEST(OptimizerState, SaveRefusesARefWhoseCountChanged) {
  std::vector<float> x(8, 1.0f), g(8, 0.5f);
  Lars lars(LarsOptions{});
  const ParamRef p{.param = x.data(), .grad = g.data(), .count = 8};
  lars.step({&p, 1});
  const ParamRef shorter{.param = x.data(), .grad = g.data(), .count = 7};
  const std::string m = invalid_argument_of([&] { lars.save_state({&shorter, 1}); });
  EXPECT_TRUE(starts_with(m, "ccl::training::Lars: save_state: ref 0 (count 7)")) << m;
}

}  // namespace
