// The pipeline schedules as data: small cases written out by hand, properties over many shapes
// (every pass once, memory bounds, bubbles against their closed forms), and the message pattern
// that run_pipeline derives from them (FIFO-consistent per pair of ranks, free of deadlock even
// when every send waits for its receive).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccl/training/pipeline.hpp"

namespace {

using ccl::training::pipeline_bubble;
using ccl::training::pipeline_bubble_closed_form;
using ccl::training::pipeline_schedule;
using ccl::training::PipelineAction;
using ccl::training::PipelineKind;
using ccl::training::PipelineTiming;

// A compact spelling of action lists: "F0" is the forward of micro-batch 0 on chunk 0, "B3.1"
// the backward of micro-batch 3 on chunk 1.
std::string spell(const std::vector<PipelineAction>& actions) {
  std::string s;
  for (const PipelineAction& a : actions) {
    if (!s.empty()) s += ' ';
    s += a.kind == PipelineAction::Forward ? 'F' : 'B';
    s += std::to_string(a.microbatch);
    if (a.chunk != 0) s += "." + std::to_string(a.chunk);
  }
  return s;
}

std::string spell_interleaved(const std::vector<PipelineAction>& actions) {
  std::string s;
  for (const PipelineAction& a : actions) {
    if (!s.empty()) s += ' ';
    s += a.kind == PipelineAction::Forward ? 'F' : 'B';
    s += std::to_string(a.microbatch) + "." + std::to_string(a.chunk);
  }
  return s;
}

TEST(PipelineSchedule, GPipeTwoStagesThreeMicrobatches) {
  for (int stage = 0; stage < 2; ++stage) {
    EXPECT_EQ(spell(pipeline_schedule(PipelineKind::GPipe, 2, 3, stage)), "F0 F1 F2 B0 B1 B2")
        << "stage " << stage;
  }
}

TEST(PipelineSchedule, OneFOneBFourStagesSixMicrobatches) {
  // Warm-up of p - s - 1 forwards, then F/B pairs, then the remaining backwards.
  EXPECT_EQ(spell(pipeline_schedule(PipelineKind::OneFOneB, 4, 6, 0)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(spell(pipeline_schedule(PipelineKind::OneFOneB, 4, 6, 1)),
            "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(spell(pipeline_schedule(PipelineKind::OneFOneB, 4, 6, 3)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
}

TEST(PipelineSchedule, OneFOneBWithFewerMicrobatchesThanStagesIsGPipe) {
  EXPECT_EQ(spell(pipeline_schedule(PipelineKind::OneFOneB, 4, 2, 0)), "F0 F1 B0 B1");
}

TEST(PipelineSchedule, InterleavedTwoStagesTwoChunksFourMicrobatches) {
  // Warm-up: (2 - s - 1)·2 + (2 - 1)·2 virtual micro-batches, i.e. 4 on stage 0 and 2 on stage 1.
  // Forwards go through chunk 0 for micro-batches 0, 1, then chunk 1 for them, then 2, 3 likewise;
  // backwards take the chunks in reverse.
  EXPECT_EQ(spell_interleaved(pipeline_schedule(PipelineKind::Interleaved, 2, 4, 0, 2)),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(spell_interleaved(pipeline_schedule(PipelineKind::Interleaved, 2, 4, 1, 2)),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

TEST(PipelineSchedule, InterleavedWithAsManyMicrobatchesAsStagesIsAllWarmup) {
  EXPECT_EQ(spell_interleaved(pipeline_schedule(PipelineKind::Interleaved, 2, 2, 1, 2)),
            "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
}

// The shapes the property tests sweep: (kind, stages, microbatches, virtual_stages).
struct Shape {
  PipelineKind kind;
  int stages;
  int microbatches;
  int virtual_stages;
};

std::string name(const Shape& s) {
  const char* kind = s.kind == PipelineKind::GPipe      ? "gpipe"
                     : s.kind == PipelineKind::OneFOneB ? "1f1b"
                                                        : "interleaved";
  return std::string(kind) + " p=" + std::to_string(s.stages) +
         " m=" + std::to_string(s.microbatches) + " v=" + std::to_string(s.virtual_stages);
}

std::vector<Shape> shapes() {
  std::vector<Shape> all;
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 12; ++m) {
      all.push_back({PipelineKind::GPipe, p, m, 1});
      all.push_back({PipelineKind::OneFOneB, p, m, 1});
    }
    for (int v = 1; v <= 4; ++v) {
      for (int m = p; m <= 4 * p; m += p) all.push_back({PipelineKind::Interleaved, p, m, v});
    }
  }
  return all;
}

TEST(PipelineSchedule, EveryPassOncePerRankAndBackwardAfterForward) {
  for (const Shape& s : shapes()) {
    for (int stage = 0; stage < s.stages; ++stage) {
      SCOPED_TRACE(name(s) + " stage " + std::to_string(stage));
      const auto actions =
          pipeline_schedule(s.kind, s.stages, s.microbatches, stage, s.virtual_stages);
      ASSERT_EQ(actions.size(), static_cast<size_t>(2 * s.microbatches * s.virtual_stages));
      std::set<std::pair<int, int>> forwarded, backwarded;
      for (const PipelineAction& a : actions) {
        ASSERT_GE(a.microbatch, 0);
        ASSERT_LT(a.microbatch, s.microbatches);
        ASSERT_GE(a.chunk, 0);
        ASSERT_LT(a.chunk, s.virtual_stages);
        const std::pair<int, int> pass{a.microbatch, a.chunk};
        if (a.kind == PipelineAction::Forward) {
          EXPECT_TRUE(forwarded.insert(pass).second) << "forward twice";
        } else {
          EXPECT_TRUE(forwarded.count(pass)) << "backward before its forward";
          EXPECT_TRUE(backwarded.insert(pass).second) << "backward twice";
        }
      }
    }
  }
}

// The most micro-batches whose forward ran on a rank and whose backward has not.
int most_in_flight(const std::vector<PipelineAction>& actions) {
  int in_flight = 0, most = 0;
  for (const PipelineAction& a : actions) {
    in_flight += a.kind == PipelineAction::Forward ? 1 : -1;
    most = std::max(most, in_flight);
  }
  return most;
}

int leading_forwards(const std::vector<PipelineAction>& actions) {
  auto first_backward = std::find_if(actions.begin(), actions.end(), [](const PipelineAction& a) {
    return a.kind == PipelineAction::Backward;
  });
  return static_cast<int>(first_backward - actions.begin());
}

TEST(PipelineSchedule, OneFOneBWarmupAndMemory) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      for (int s = 0; s < p; ++s) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " s=" + std::to_string(s));
        const auto actions = pipeline_schedule(PipelineKind::OneFOneB, p, m, s);
        const int warmup = std::min(p - s - 1, m);
        // The warm-up forwards, then the steady state's first forward (if any is left).
        EXPECT_EQ(leading_forwards(actions), warmup < m ? warmup + 1 : m);
        // The memory property of 1F1B: stage s never keeps more than p - s activations.
        EXPECT_LE(most_in_flight(actions), p - s);
        EXPECT_EQ(most_in_flight(actions), std::min(p - s, m));
      }
    }
  }
}

TEST(PipelineSchedule, GPipeKeepsEveryMicrobatch) {
  EXPECT_EQ(most_in_flight(pipeline_schedule(PipelineKind::GPipe, 4, 8, 0)), 8);
}

TEST(PipelineSchedule, InterleavedWarmupAsMegatron) {
  for (int p = 1; p <= 6; ++p) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = p; m <= 4 * p; m += p) {
        for (int s = 0; s < p; ++s) {
          SCOPED_TRACE("p=" + std::to_string(p) + " v=" + std::to_string(v) +
                       " m=" + std::to_string(m) + " s=" + std::to_string(s));
          const int total = m * v;
          const int warmup = m == p ? total : std::min((p - s - 1) * 2 + (v - 1) * p, total);
          const auto actions = pipeline_schedule(PipelineKind::Interleaved, p, m, s, v);
          EXPECT_EQ(leading_forwards(actions), warmup < total ? warmup + 1 : total);
          EXPECT_EQ(most_in_flight(actions), std::min(warmup + 1, total));
        }
      }
    }
  }
}

TEST(PipelineBubble, SimulationEqualsClosedForm) {
  // The closed forms hold exactly under the simulation's model (uniform stages, free
  // communication) for every shape swept and every timing, including backward == forward.
  const PipelineTiming timings[] = {{1.0, 2.0}, {1.0, 1.0}, {1.0, 3.0}};
  for (const PipelineTiming& t : timings) {
    for (const Shape& s : shapes()) {
      SCOPED_TRACE(name(s) + " forward " + std::to_string(t.forward) + " backward " +
                   std::to_string(t.backward));
      EXPECT_NEAR(pipeline_bubble(s.kind, s.stages, s.microbatches, s.virtual_stages, t),
                  pipeline_bubble_closed_form(s.kind, s.stages, s.microbatches, s.virtual_stages),
                  1e-9);
    }
  }
}

TEST(PipelineBubble, KnownValues) {
  EXPECT_NEAR(pipeline_bubble(PipelineKind::GPipe, 4, 8), 3.0 / 8, 1e-12);
  EXPECT_NEAR(pipeline_bubble(PipelineKind::OneFOneB, 4, 8), 3.0 / 8, 1e-12);
  EXPECT_NEAR(pipeline_bubble(PipelineKind::Interleaved, 4, 8, 2), 3.0 / 16, 1e-12);
  EXPECT_EQ(pipeline_bubble(PipelineKind::OneFOneB, 1, 5), 0.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_closed_form(PipelineKind::Interleaved, 4, 8, 4), 3.0 / 32);
  EXPECT_DOUBLE_EQ(pipeline_bubble_closed_form(PipelineKind::GPipe, 2, 4), 0.25);
}

TEST(PipelineSchedule, BadArgumentsThrow) {
  using K = PipelineKind;
  EXPECT_THROW(pipeline_schedule(K::GPipe, 0, 4, 0), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(K::OneFOneB, 2, 0, 0), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(K::OneFOneB, 2, 4, -1), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(K::OneFOneB, 2, 4, 2), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(K::Interleaved, 2, 4, 0, 0), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(K::GPipe, 2, 4, 0, 2), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(K::OneFOneB, 2, 4, 0, 2), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(K::Interleaved, 2, 3, 0, 2), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(static_cast<K>(7), 2, 4, 0), std::invalid_argument);

  EXPECT_THROW(pipeline_bubble(K::Interleaved, 4, 6, 2), std::invalid_argument);
  EXPECT_THROW(pipeline_bubble(K::GPipe, 0, 4), std::invalid_argument);
  EXPECT_THROW(pipeline_bubble(K::GPipe, 2, 4, 1, {-1.0, 2.0}), std::invalid_argument);
  EXPECT_THROW(pipeline_bubble(K::GPipe, 2, 4, 1, {0.0, 0.0}), std::invalid_argument);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(pipeline_bubble(K::GPipe, 2, 4, 1, {1.0, nan}), std::invalid_argument);
  EXPECT_THROW(pipeline_bubble_closed_form(K::OneFOneB, 2, 0), std::invalid_argument);
  EXPECT_THROW(pipeline_bubble_closed_form(K::GPipe, 2, 4, 3), std::invalid_argument);
}

// The messages run_pipeline posts, rebuilt from the schedules. The runner cuts a rank's actions
// into steps: one action each, but in the interleaved schedule's steady state a forward and the
// backward after it. Group g of a rank holds the sends of step g - 1's outputs, then the receives
// of step g's inputs (the last group: the last step's sends only).
struct Message {
  int from, to;
  PipelineAction::Kind kind;  // forward: activations; backward: gradients
  int microbatch;
  int consumer;  // the virtual stage that receives it
  friend bool operator==(const Message&, const Message&) = default;
};

struct Op {
  bool send;
  Message message;
};

std::vector<std::vector<PipelineAction>> steps_of(const std::vector<PipelineAction>& actions,
                                                  bool pairs) {
  std::vector<std::vector<PipelineAction>> steps;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (pairs && i > 0 && actions[i].kind == PipelineAction::Backward &&
        actions[i - 1].kind == PipelineAction::Forward) {
      steps.back().push_back(actions[i]);
    } else {
      steps.push_back({actions[i]});
    }
  }
  return steps;
}

std::vector<std::vector<Op>> groups_of(const Shape& s, int rank, bool pair_steady_state = true) {
  const int last = s.stages * s.virtual_stages - 1;
  const auto actions = pipeline_schedule(s.kind, s.stages, s.microbatches, rank, s.virtual_stages);
  // All forwards, then all backwards: no steady state.
  const auto first_backward = std::find_if(actions.begin(), actions.end(), [](const auto& a) {
    return a.kind == PipelineAction::Backward;
  });
  const bool steady_state = std::any_of(first_backward, actions.end(), [](const auto& a) {
    return a.kind == PipelineAction::Forward;
  });
  const auto steps =
      steps_of(actions, pair_steady_state && s.kind == PipelineKind::Interleaved && steady_state);
  std::vector<std::vector<Op>> groups(steps.size() + 1);
  for (size_t g = 0; g < steps.size(); ++g) {
    for (const PipelineAction& a : steps[g]) {
      const int vs = a.chunk * s.stages + rank;
      const bool forward = a.kind == PipelineAction::Forward;
      const int from = forward ? vs - 1 : vs + 1;
      if (from >= 0 && from <= last) {
        groups[g].push_back({false, {from % s.stages, rank, a.kind, a.microbatch, vs}});
      }
      const int to = forward ? vs + 1 : vs - 1;
      if (to >= 0 && to <= last) {
        groups[g + 1].push_back({true, {rank, to % s.stages, a.kind, a.microbatch, to}});
      }
    }
  }
  return groups;
}

TEST(PipelineRunnerPlan, MessagesBetweenTwoRanksMatchInOrder) {
  // ccl matches the messages between two ranks in the order they were posted, and every message
  // has activation_count floats: the n-th send from a to b must be the n-th receive b expects.
  for (const Shape& s : shapes()) {
    if (s.stages == 1) continue;  // one rank passes its chunks' data locally
    SCOPED_TRACE(name(s));
    std::map<std::pair<int, int>, std::vector<Message>> sent, received;
    for (int rank = 0; rank < s.stages; ++rank) {
      for (const auto& group : groups_of(s, rank)) {
        EXPECT_LE(group.size(), 4u);  // two sends and two receives at most
        for (const Op& op : group) {
          auto& channel = op.send ? sent : received;
          channel[{op.message.from, op.message.to}].push_back(op.message);
        }
      }
    }
    EXPECT_EQ(sent.size(), received.size());
    for (const auto& [pair, messages] : sent) {
      EXPECT_TRUE(messages == received[pair]) << pair.first << " -> " << pair.second;
    }
  }
}

// The strictest transport: an operation completes only while both ranks sit in the groups that
// hold its two halves, and a rank leaves a group once all of its operations completed. Returns
// whether every rank gets through all of its groups.
bool completes_with_rendezvous(const Shape& s, bool pair_steady_state) {
  std::vector<std::vector<std::vector<Op>>> groups;
  for (int rank = 0; rank < s.stages; ++rank) {
    groups.push_back(groups_of(s, rank, pair_steady_state));
  }
  std::vector<size_t> at(groups.size(), 0);
  std::vector<std::vector<bool>> done(groups.size());
  auto enter = [&](size_t rank) {
    if (at[rank] < groups[rank].size()) done[rank].assign(groups[rank][at[rank]].size(), false);
  };
  for (size_t r = 0; r < groups.size(); ++r) enter(r);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < groups.size(); ++r) {
      if (at[r] == groups[r].size()) continue;
      const auto& group = groups[r][at[r]];
      for (size_t i = 0; i < group.size(); ++i) {
        const Op& op = group[i];
        const size_t peer = static_cast<size_t>(op.send ? op.message.to : op.message.from);
        if (done[r][i] || at[peer] == groups[peer].size()) continue;
        const auto& theirs = groups[peer][at[peer]];
        for (size_t j = 0; j < theirs.size(); ++j) {
          if (theirs[j].send != op.send && theirs[j].message == op.message) {
            done[r][i] = true;
            done[peer][j] = true;
          }
        }
      }
      if (std::all_of(done[r].begin(), done[r].end(), [](bool d) { return d; })) {
        ++at[r];
        enter(r);
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < groups.size(); ++r) {
    if (at[r] != groups[r].size()) return false;
  }
  return true;
}

TEST(PipelineRunnerPlan, GroupsCannotDeadlockEvenWithRendezvousSends) {
  for (const Shape& s : shapes()) {
    if (s.stages == 1) continue;
    EXPECT_TRUE(completes_with_rendezvous(s, true)) << name(s);
  }
}

TEST(PipelineRunnerPlan, InterleavedNeedsItsSteadyStatePairs) {
  // Why the runner pairs the interleaved steady state's forward and backward: with one group per
  // action, rank 0's group 6 sends what rank 1 receives in its group 7, and rank 1's group 6
  // sends what rank 0 receives in its group 7 (PipelineRunnerLarge shows it with real messages).
  EXPECT_FALSE(completes_with_rendezvous({PipelineKind::Interleaved, 2, 4, 2}, false));
  EXPECT_TRUE(completes_with_rendezvous({PipelineKind::OneFOneB, 4, 8, 1}, false));
}

}  // namespace
