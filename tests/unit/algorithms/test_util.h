// Helpers shared by the schedule tests: rank orders and building every rank's schedule.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "algorithms/ring.h"
#include "algorithms/schedule.h"

namespace ccl::algo::test {

enum class OrderKind { Identity, Reversed, Shuffled };

inline const char* order_name(OrderKind k) {
  return k == OrderKind::Identity ? "identity" : k == OrderKind::Reversed ? "reversed" : "shuffled";
}

// Empty for the identity, so the builders' default path is the one tested.
inline std::vector<int> make_order(OrderKind kind, int n) {
  std::vector<int> order;
  if (kind == OrderKind::Identity) return order;
  for (int i = 0; i < n; ++i) order.push_back(kind == OrderKind::Reversed ? n - 1 - i : i);
  if (kind == OrderKind::Shuffled) {
    // Fisher-Yates on raw mt19937 output: the same permutation with every standard library.
    std::mt19937 rng(12345u + static_cast<unsigned>(n));
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
  }
  return order;
}

// Displacements for blocks of `counts`: laid out in a random order with random gaps (0..3
// elements) before each, never overlapping. Raw mt19937 output, so every library agrees.
inline std::vector<size_t> random_layout(const std::vector<size_t>& counts, std::mt19937& rng) {
  std::vector<size_t> order(counts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  std::vector<size_t> displs(counts.size());
  size_t at = 0;
  for (size_t q : order) {
    at += rng() % 4;
    displs[q] = at;
    at += counts[q];
  }
  return displs;
}

// A schedule as plain rounds of steps, for tests that write one by hand or edit a built one (to
// break it on purpose): a Schedule keeps its steps encoded and reads them back as values, so an
// edit is unpack, change, pack. pack() drops rounds left empty, as Schedule::end_round does.
using PlainRounds = std::vector<std::vector<Step>>;
inline PlainRounds unpack(const Schedule& s) {
  PlainRounds rounds;
  for (const Schedule::Round round : s.rounds()) rounds.emplace_back(round.begin(), round.end());
  return rounds;
}
inline Schedule pack(const PlainRounds& rounds, size_t scratch_elems = 0) {
  Schedule s;
  s.scratch_elems = scratch_elems;
  for (const std::vector<Step>& round : rounds) {
    for (const Step& st : round) s.add(st);
    s.end_round();
  }
  return s;
}

// A round with no steps costs a round trip through the executor for nothing.
// Elements a rank's schedule sends and receives (Recv and RecvReduce).
struct Traffic {
  size_t sent = 0;
  size_t received = 0;
};
inline Traffic traffic_of(const Schedule& schedule) {
  Traffic t;
  for (const Schedule::Round round : schedule.rounds()) {
    for (const Step st : round) {
      if (st.kind == StepKind::Send) t.sent += st.src.count;
      if (st.kind == StepKind::Recv || st.kind == StepKind::RecvReduce) t.received += st.dst.count;
    }
  }
  return t;
}

inline bool has_empty_round(const std::vector<Schedule>& all) {
  for (const Schedule& s : all) {
    for (const Schedule::Round r : s.rounds()) {
      if (r.empty()) return true;
    }
  }
  return false;
}

// Zero-element messages are only harmless if the peer expects them too; builders make none.
inline bool has_empty_message(const std::vector<Schedule>& all) {
  for (const Schedule& s : all) {
    for (const Schedule::Round r : s.rounds()) {
      for (const Step st : r) {
        if (st.kind == StepKind::Send && st.src.count == 0) return true;
        if (st.kind == StepKind::Recv && st.dst.count == 0) return true;
      }
    }
  }
  return false;
}

template <typename Build>
std::vector<Schedule> for_all_ranks(int n, Build build) {
  std::vector<Schedule> out;
  for (int r = 0; r < n; ++r) out.push_back(build(r));
  return out;
}

// Every rank's schedule from a ring builder: any callable taking the RingParams.
template <typename Builder>
std::vector<Schedule> build_ring(Builder builder, int n, size_t count, size_t chunk,
                                 const std::vector<int>& order) {
  return for_all_ranks(n, [&](int r) {
    RingParams p;
    p.nranks = n;
    p.rank = r;
    p.count = count;
    p.chunk_elems = chunk;
    p.order = order;
    return builder(p);
  });
}

// The sweep the ring tests instantiate: nranks 1..16 x three ring orders, named "n5_shuffled".
inline auto ring_sweep() {
  return ::testing::Combine(
      ::testing::Range(1, 17),
      ::testing::Values(OrderKind::Identity, OrderKind::Reversed, OrderKind::Shuffled));
}
struct RingSweepName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    return "n" + std::to_string(std::get<0>(info.param)) + "_" +
           order_name(std::get<1>(info.param));
  }
};

}  // namespace ccl::algo::test
