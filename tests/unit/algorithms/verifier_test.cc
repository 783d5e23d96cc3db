// The verifier itself: it must accept correct schedules of every collective (naive ones written
// here by hand) and reject broken ones, each for the right reason.
#include <gtest/gtest.h>

#include "algorithms/ring.h"
#include "schedule_verifier.h"
#include "test_util.h"

namespace ccl::algo {
namespace {

using verify::Problem;

Region in(size_t off, size_t n) { return Region{Buffer::Input, off, n}; }
Region out(size_t off, size_t n) { return Region{Buffer::Output, off, n}; }
Region scratch(size_t off, size_t n) { return Region{Buffer::Scratch, off, n}; }
Step send(int peer, Region src) { return Step{StepKind::Send, peer, src, Region{}}; }
Step recv(int peer, Region dst) { return Step{StepKind::Recv, peer, Region{}, dst}; }
Step reduce(int peer, Region src, Region dst) { return Step{StepKind::RecvReduce, peer, src, dst}; }
Step copy(Region src, Region dst) { return Step{StepKind::Copy, -1, src, dst}; }
Step finalize(Region dst) { return Step{StepKind::Finalize, -1, Region{}, dst}; }

std::vector<Schedule> ring_allreduce_all(int n, size_t count) {
  return test::for_all_ranks(n, [&](int r) {
    RingParams p;
    p.nranks = n;
    p.rank = r;
    p.count = count;
    return ring_allreduce(p);
  });
}

// Expects verification to fail with a message containing `needle`.
void expect_rejected(const std::vector<Schedule>& s, const Problem& p, const std::string& needle) {
  const std::string err = verify::verify(s, p);
  EXPECT_NE(err.find(needle), std::string::npos) << "error was: '" << err << "'";
}

// ---- the symbolic memory ----

TEST(SymbolicBuffer, ReadsBackWhatWasWrittenAndStaysCompact) {
  verify::SymbolicBuffer b(100);
  EXPECT_EQ(b.segment_count(), 1u);
  // Ten 10-element writes of one contiguous source coalesce into one segment.
  for (size_t off = 0; off < 100; off += 10) {
    b.write(off, verify::Runs{{10, verify::Value::input_of(3, static_cast<int64_t>(off))}});
  }
  EXPECT_EQ(b.segment_count(), 1u);
  const verify::Runs r = b.read(25, 10);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].len, 10u);
  EXPECT_EQ(r[0].value, verify::Value::input_of(3, 25));  // element k is in3[25 + k]
  // A shifted write breaks the run into three segments.
  b.write(40, verify::Runs{{5, verify::Value::input_of(3, 0)}});
  EXPECT_EQ(b.segment_count(), 3u);
  EXPECT_EQ(b.read(42, 1)[0].value, verify::Value::input_of(3, 2));
  EXPECT_EQ(b.read(45, 1)[0].value, verify::Value::input_of(3, 45));
}

TEST(SymbolicBuffer, CombineCountsEachContribution) {
  const verify::Value a = verify::Value::input_of(0, 0), b = verify::Value::input_of(1, 0);
  EXPECT_EQ(verify::combine(a, b), verify::Value::reduced(2, 0, false));
  EXPECT_EQ(verify::combine(verify::combine(a, b), a).terms[0].count, 2u);
  EXPECT_THROW(verify::combine(a, verify::Value::undefined()), verify::VerifyError);
  verify::Value f = a;
  f.finalized = true;
  EXPECT_THROW(verify::combine(f, b), verify::VerifyError);
}

// ---- correct naive schedules of the other collectives: the problems are right ----

TEST(VerifierAccepts, DirectAllgather) {
  for (int n : {1, 2, 5}) {
    for (size_t c : {size_t{0}, size_t{1}, size_t{6}}) {
      const auto s = test::for_all_ranks(n, [&](int r) {
        std::vector<Step> round{copy(in(0, c), out(r * c, c))};
        for (int k = 1; k < n; ++k) {
          round.push_back(send((r + k) % n, in(0, c)));
          const int from = (r - k + n) % n;
          round.push_back(recv(from, out(from * c, c)));
        }
        return test::pack({round});
      });
      for (bool ip : {false, true}) {
        EXPECT_EQ(verify::verify(s, verify::allgather_problem(n, c, ip)), "") << n << " " << c;
      }
    }
  }
}

TEST(VerifierAccepts, DirectAlltoall) {
  const int n = 4;
  const size_t c = 3;
  const auto s = test::for_all_ranks(n, [&](int r) {
    std::vector<Step> round{copy(in(r * c, c), out(r * c, c))};
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      round.push_back(send(q, in(q * c, c)));
      round.push_back(recv(q, out(q * c, c)));
    }
    return test::pack({round});
  });
  EXPECT_EQ(verify::verify(s, verify::alltoall_problem(n, c)), "");
  // Blocks landing in the wrong slot are caught.
  auto bad = s;
  test::PlainRounds edit = test::unpack(bad[2]);
  std::swap(edit[0][2].dst, edit[0][4].dst);
  bad[2] = test::pack(edit);
  expect_rejected(bad, verify::alltoall_problem(n, c), "expected");
}

TEST(VerifierAccepts, DirectReduceScatterThroughScratch) {
  const int n = 4;
  const size_t c = 5;
  const auto s = test::for_all_ranks(n, [&](int r) {
    Schedule sc;
    sc.scratch_elems = c;
    sc.add(copy(in(r * c, c), scratch(0, c)));
    for (int k = 1; k < n; ++k) sc.add(send((r + k) % n, in(((r + k) % n) * c, c)));
    sc.end_round();
    for (int k = 1; k < n; ++k) {
      sc.add_round({reduce((r - k + n) % n, scratch(0, c), scratch(0, c))});
    }
    sc.add_round({finalize(scratch(0, c))});
    sc.add_round({copy(scratch(0, c), out(0, c))});
    return sc;
  });
  for (bool ip : {false, true}) {
    EXPECT_EQ(verify::verify(s, verify::reducescatter_problem(n, c, ip)), "") << ip;
  }
}

TEST(VerifierAccepts, LinearReduce) {
  const int n = 5, root = 2;
  const size_t c = 4;
  const auto s = test::for_all_ranks(n, [&](int r) {
    Schedule sc;
    if (r != root) {
      sc.add_round({send(root, in(0, c))});
      return sc;
    }
    sc.add_round({copy(in(0, c), out(0, c))});
    for (int q = 0; q < n; ++q) {
      if (q != root) sc.add_round({reduce(q, out(0, c), out(0, c))});
    }
    sc.add_round({finalize(out(0, c))});
    return sc;
  });
  for (bool ip : {false, true}) {
    EXPECT_EQ(verify::verify(s, verify::reduce_problem(n, c, root, ip)), "");
  }
  auto bad = s;
  bad[0].add_round({copy(in(0, c), out(0, c))});  // non-root recvbuff may be NULL
  expect_rejected(bad, verify::reduce_problem(n, c, root, false), "NULL");
}

// ---- broken ring allreduce schedules ----

TEST(VerifierRejects, DroppedStep) {
  auto s = ring_allreduce_all(4, 12);
  test::PlainRounds rounds = test::unpack(s[2]);
  std::vector<Step>& steps = rounds[0];
  ASSERT_EQ(steps[1].kind, StepKind::RecvReduce);
  steps.erase(steps.begin() + 1);
  s[2] = test::pack(rounds, s[2].scratch_elems);
  EXPECT_NE(verify::verify(s, verify::allreduce_problem(4, 12, false)), "");
}

TEST(VerifierRejects, SwappedPieces) {
  auto s = ring_allreduce_all(4, 12);  // pieces of 3: a swap keeps every message size
  test::PlainRounds rounds = test::unpack(s[1]);
  // Rank 1 receives pieces 1, 0, 3 in the three allgather rounds; take 3 first and 1 last.
  const size_t last = rounds.size() - 1;
  ASSERT_EQ(rounds[last][1].kind, StepKind::Recv);
  std::swap(rounds[last][1].dst, rounds[last - 2][1].dst);
  s[1] = test::pack(rounds, s[1].scratch_elems);
  expect_rejected(s, verify::allreduce_problem(4, 12, false), "expected");
}

TEST(VerifierRejects, FinalizeTwiceOrNever) {
  auto twice = ring_allreduce_all(3, 9);
  twice[0].add_round({finalize(out(0, 9))});
  expect_rejected(twice, verify::allreduce_problem(3, 9, false), "already finalized");

  auto never = ring_allreduce_all(3, 9);
  test::PlainRounds rounds = test::unpack(never[2]);
  for (size_t i = 0; i < rounds.size(); ++i) {
    if (rounds[i][0].kind == StepKind::Finalize) {
      rounds.erase(rounds.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  ASSERT_EQ(rounds.size() + 1, never[2].round_count());
  never[2] = test::pack(rounds, never[2].scratch_elems);
  expect_rejected(never, verify::allreduce_problem(3, 9, false), "expected final{");
}

TEST(VerifierRejects, ReduceIntoFinalizedData) {
  // Finalizing a partial sum early: the next reduction folds more data into an average.
  auto s = ring_allreduce_all(3, 9);
  test::PlainRounds rounds = test::unpack(s[1]);
  rounds.insert(rounds.begin() + 1, {finalize(out(0, 3))});
  s[1] = test::pack(rounds, s[1].scratch_elems);
  expect_rejected(s, verify::allreduce_problem(3, 9, false), "finalized");
}

TEST(VerifierRejects, LocalOperandFromOutputOnlyOutOfPlace) {
  // The classic mistake: taking the local operand of a later reduce-scatter step from Output.
  // In-place that is the same memory and correct, out-of-place it reads garbage: both runs are
  // needed, and the verifier tells them apart.
  auto s = ring_allreduce_all(4, 8);
  for (auto& sched : s) {
    test::PlainRounds rounds = test::unpack(sched);
    for (size_t i = 1; i < 3; ++i) rounds[i][1].src.buffer = Buffer::Output;
    sched = test::pack(rounds, sched.scratch_elems);
  }
  expect_rejected(s, verify::allreduce_problem(4, 8, false), "garbage");
  EXPECT_EQ(verify::verify(s, verify::allreduce_problem(4, 8, true)), "");
}

TEST(VerifierRejects, InPlaceOnlyBug) {
  // Allgather staging the incoming block in the rank's own slot, which in-place is its Input:
  // right out-of-place, wrong in-place.
  const int n = 2;
  const size_t c = 3;
  const auto s = test::for_all_ranks(n, [&](int r) {
    const int peer = 1 - r;
    return test::pack({{send(peer, in(0, c))},
                       {recv(peer, out(r * c, c))},
                       {copy(out(r * c, c), out(peer * c, c))},
                       {copy(in(0, c), out(r * c, c))}});
  });
  EXPECT_EQ(verify::verify(s, verify::allgather_problem(n, c, false)), "");
  expect_rejected(s, verify::allgather_problem(n, c, true), "expected");
}

TEST(VerifierRejects, DoubleCounting) {
  // Each rank sums both inputs, then adds the peer's sum again.
  const auto s = test::for_all_ranks(2, [&](int r) {
    const int peer = 1 - r;
    return test::pack({{send(peer, in(0, 1)), reduce(peer, in(0, 1), out(0, 1))},
                       {send(peer, out(0, 1))},
                       {reduce(peer, out(0, 1), out(0, 1))},
                       {finalize(out(0, 1))}});
  });
  expect_rejected(s, verify::allreduce_problem(2, 1, false), "2*in0");
}

// ---- broken mechanics ----

Schedule two_step(Step a, Step b) { return test::pack({{a}, {b}}); }

TEST(VerifierRejects, Deadlock) {
  const auto s = test::for_all_ranks(
      2, [](int r) { return two_step(recv(1 - r, out(0, 1)), send(1 - r, in(0, 1))); });
  expect_rejected(s, verify::allgather_problem(2, 1, false), "deadlock");
}

TEST(VerifierRejects, HeadToHeadSendsOnlyWithoutBuffering) {
  // Both ranks send first and receive in the next round: fine if the transport buffers a send,
  // a deadlock if a send waits for its receiver.
  const auto s = test::for_all_ranks(
      2, [](int r) { return two_step(send(1 - r, in(0, 1)), recv(1 - r, out(1 - r, 1))); });
  verify::Problem p = verify::allgather_problem(2, 1, false);
  for (int r = 0; r < 2; ++r) {  // a rank's own block is never copied here: don't check it
    p.ranks[r].expect.erase(p.ranks[r].expect.begin() + r);
  }
  EXPECT_EQ(verify::verify(s, p), "");
  p.rendezvous = true;
  expect_rejected(s, p, "send(s) to be received");
}

TEST(VerifierRejects, MessageSizeMismatch) {
  std::vector<Schedule> s = {test::pack({{send(1, in(0, 3))}}), test::pack({{recv(0, out(0, 2))}})};
  expect_rejected(s, verify::allreduce_problem(2, 3, false),
                  "receives 2 elements but rank 0 sent 3");
}

TEST(VerifierRejects, MessageNeverReceived) {
  std::vector<Schedule> s = {test::pack({{send(1, in(0, 3)), send(1, in(0, 3))}}),
                             test::pack({{recv(0, out(0, 3))}})};
  expect_rejected(s, verify::broadcast_problem(2, 3, 0, false), "never received");
}

TEST(VerifierRejects, BadRegionsPeersAndBuffers) {
  const Problem p = verify::broadcast_problem(2, 4, 0, false);
  const auto one = [&](Step root_step, Step other_step) {
    return std::vector<Schedule>{test::pack({{root_step}}), test::pack({{other_step}})};
  };
  expect_rejected(one(send(1, in(2, 3)), recv(0, out(0, 3))), p, "out of bounds");
  expect_rejected(one(send(1, in(0, 3)), recv(0, out(2, 3))), p, "out of bounds");
  expect_rejected(one(send(0, in(0, 3)), recv(0, out(0, 3))), p, "invalid peer 0");
  expect_rejected(one(send(7, in(0, 3)), recv(0, out(0, 3))), p, "invalid peer 7");
  expect_rejected(one(send(1, in(0, 3)), recv(0, in(0, 3))), p, "writes to Input");
  // Scratch exists only up to scratch_elems.
  std::vector<Schedule> s = one(send(1, in(0, 4)), recv(0, scratch(0, 4)));
  s[1].scratch_elems = 3;
  expect_rejected(s, p, "Scratch[0,4) is out of bounds (3 elements)");
  s[1].scratch_elems = 4;
  expect_rejected(s, p, "Output[0,4) holds garbage");  // accepted mechanically, wrong result
}

TEST(VerifierRejects, RaceWithinARound) {
  const auto s = test::for_all_ranks(2, [](int r) {
    return test::pack({{send(1 - r, out(0, 2)), recv(1 - r, out(1, 2))}});
  });
  expect_rejected(s, verify::allreduce_problem(2, 4, false), "same memory");
  const auto overlap =
      test::for_all_ranks(1, [](int) { return test::pack({{copy(out(0, 3), out(1, 3))}}); });
  expect_rejected(overlap, verify::allreduce_problem(1, 4, false), "overlap");
}

TEST(VerifierRejects, FinalizeOfGarbage) {
  const auto s = test::for_all_ranks(1, [](int) { return test::pack({{finalize(out(0, 2))}}); });
  expect_rejected(s, verify::allreduce_problem(1, 2, false), "Finalize of garbage");
}

TEST(VerifierRejects, NonRootReadsItsInputInBroadcast) {
  auto s = test::for_all_ranks(3, [](int r) {
    RingParams p;
    p.nranks = 3;
    p.rank = r;
    p.count = 6;
    return chain_broadcast(p, 0);
  });
  ASSERT_EQ(verify::verify(s, verify::broadcast_problem(3, 6, 0, false)), "");
  // Rank 1 forwards from its own Input instead of what it received.
  test::PlainRounds rounds = test::unpack(s[1]);
  rounds[1][0].src.buffer = Buffer::Input;
  s[1] = test::pack(rounds, s[1].scratch_elems);
  for (bool ip : {false, true}) {
    expect_rejected(s, verify::broadcast_problem(3, 6, 0, ip), "NULL");
  }
}

TEST(VerifierRejects, BarrierMissingItsLastRound) {
  const int n = 5;
  auto s = test::for_all_ranks(n, [&](int r) { return dissemination_barrier(n, r); });
  for (auto& one : s) {
    test::PlainRounds rounds = test::unpack(one);
    rounds.pop_back();
    one = test::pack(rounds, one.scratch_elems);
  }
  expect_rejected(s, verify::barrier_problem(n), "before hearing");
}

}  // namespace
}  // namespace ccl::algo
