// The device programs of every collective (algorithms/device/device_collectives.h) run through
// the model of the ranks' streams, flags and scratch (device_program_model.h): exact results,
// no race under any interleaving, no deadlock, every flag Empty at the end; and several calls
// in a row, as one communicator makes them, sharing flags and scratch, on one stream of a rank
// or on several.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "algorithms/device/device_collectives.h"
#include "device_program_model.h"

namespace ccl::algo::device {
namespace {

using model::Buffers;
using model::Call;
using model::elements;
using model::Value;

uint64_t all_ranks(int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

Value of(int64_t index, int rank) { return {index, uint64_t{1} << rank, 0, 0, 0}; }

// The expected result of a reduction of every rank's element `index`.
Value reduced(int64_t index, int n, Reduction red) {
  return {index, all_ranks(n), red.scale_input ? all_ranks(n) : 0, red.average ? 1 : 0, 0};
}

// One call's problem: the programs, the buffers and what every rank's Output must hold.
struct Problem {
  Call call;
  std::vector<std::vector<Value>> want;  // per rank; empty: Output not checked
  std::vector<size_t> out_bytes;
};

Shape shape_of(int n, int r, size_t elem, uint64_t half) { return Shape{n, r, elem, half}; }

Problem allreduce(int n, size_t elem, uint64_t half, uint64_t count, AllReduceAlgorithm algo,
                  Reduction red, bool in_place) {
  Problem p;
  for (int r = 0; r < n; ++r) {
    p.call.programs.push_back(all_reduce(shape_of(n, r, elem, half), count, algo, red));
    Buffers b;
    b.input = elements(count, elem, [&](size_t i) { return of(static_cast<int64_t>(i), r); });
    if (in_place) {
      b.in_place = true;
    } else {
      b.output.assign(count * elem, Value{});
    }
    p.call.buffers.push_back(b);
    p.want.push_back(elements(count, elem, [&](size_t i) { return reduced(i, n, red); }));
    p.out_bytes.push_back(count * elem);
  }
  return p;
}

Problem broadcast_problem(int n, size_t elem, uint64_t half, uint64_t count, int root,
                          bool in_place) {
  Problem p;
  for (int r = 0; r < n; ++r) {
    p.call.programs.push_back(broadcast(shape_of(n, r, elem, half), count, root, in_place));
    Buffers b;
    if (r == root) {
      b.input = elements(count, elem, [&](size_t i) { return of(i, r); });
    }
    if (in_place && r == root) {
      b.in_place = true;
    } else {
      b.output.assign(count * elem, Value{});
    }
    p.call.buffers.push_back(b);
    p.want.push_back(elements(count, elem, [&](size_t i) { return of(i, root); }));
    p.out_bytes.push_back(count * elem);
  }
  return p;
}

Problem reduce_problem(int n, size_t elem, uint64_t half, uint64_t count, int root, Reduction red,
                       bool in_place) {
  Problem p;
  for (int r = 0; r < n; ++r) {
    p.call.programs.push_back(reduce(shape_of(n, r, elem, half), count, root, red));
    Buffers b;
    b.input = elements(count, elem, [&](size_t i) { return of(i, r); });
    if (r == root) {
      if (in_place) {
        b.in_place = true;
      } else {
        b.output.assign(count * elem, Value{});
      }
      p.want.push_back(elements(count, elem, [&](size_t i) { return reduced(i, n, red); }));
    } else {
      p.want.emplace_back();  // recvbuff of a non-root may be NULL: none here, any use fails
    }
    p.call.buffers.push_back(b);
    p.out_bytes.push_back(r == root ? count * elem : 0);
  }
  return p;
}

Problem allgather_problem(int n, size_t elem, uint64_t half, uint64_t count, bool in_place) {
  Problem p;
  const size_t block = count * elem;
  for (int r = 0; r < n; ++r) {
    p.call.programs.push_back(all_gather(shape_of(n, r, elem, half), count, in_place));
    Buffers b;
    const std::vector<Value> mine = elements(count, elem, [&](size_t i) { return of(i, r); });
    if (in_place) {
      b.in_place = true;
      b.input.assign(n * block, Value{});
      std::copy(mine.begin(), mine.end(), b.input.begin() + static_cast<long>(r * block));
      b.input_offset = r * block;
    } else {
      b.input = mine;
      b.output.assign(n * block, Value{});
    }
    p.call.buffers.push_back(b);
    std::vector<Value> want;
    for (int q = 0; q < n; ++q) {
      const auto theirs = elements(count, elem, [&](size_t i) { return of(i, q); });
      want.insert(want.end(), theirs.begin(), theirs.end());
    }
    p.want.push_back(want);
    p.out_bytes.push_back(n * block);
  }
  return p;
}

Problem allgatherv_problem(int n, size_t elem, uint64_t half, const std::vector<size_t>& counts,
                           bool in_place) {
  Problem p;
  std::vector<size_t> displs(n);
  size_t total = 0;
  for (int q = n - 1; q >= 0; --q) {  // blocks in reverse rank order, one element apart
    displs[q] = total;
    total += counts[q] + 1;
  }
  for (int r = 0; r < n; ++r) {
    p.call.programs.push_back(all_gather_v(shape_of(n, r, elem, half), counts, displs, in_place));
    Buffers b;
    const auto mine = elements(counts[r], elem, [&](size_t i) { return of(i, r); });
    if (in_place) {
      b.in_place = true;
      b.input.assign(total * elem, Value{});
      std::copy(mine.begin(), mine.end(), b.input.begin() + static_cast<long>(displs[r] * elem));
      b.input_offset = displs[r] * elem;
    } else {
      b.input = mine;
      b.output.assign(total * elem, Value{});
    }
    p.call.buffers.push_back(b);
    std::vector<Value> want(total * elem, Value{});
    for (int q = 0; q < n; ++q) {
      const auto theirs = elements(counts[q], elem, [&](size_t i) { return of(i, q); });
      std::copy(theirs.begin(), theirs.end(), want.begin() + static_cast<long>(displs[q] * elem));
    }
    p.want.push_back(want);
    p.out_bytes.push_back(total * elem);
  }
  return p;
}

Problem reducescatter_problem(int n, size_t elem, uint64_t half, uint64_t recvcount, Reduction red,
                              bool in_place) {
  Problem p;
  for (int r = 0; r < n; ++r) {
    p.call.programs.push_back(reduce_scatter(shape_of(n, r, elem, half), recvcount, red));
    Buffers b;
    b.input = elements(n * recvcount, elem, [&](size_t i) { return of(i, r); });
    if (in_place) {
      b.in_place = true;
      b.output_offset = r * recvcount * elem;
    } else {
      b.output.assign(recvcount * elem, Value{});
    }
    p.call.buffers.push_back(b);
    p.want.push_back(
        elements(recvcount, elem, [&](size_t i) { return reduced(r * recvcount + i, n, red); }));
    p.out_bytes.push_back(recvcount * elem);
  }
  return p;
}

Problem alltoall_problem(int n, size_t elem, uint64_t half, uint64_t count, bool in_place) {
  Problem p;
  for (int r = 0; r < n; ++r) {
    p.call.programs.push_back(all_to_all(shape_of(n, r, elem, half), count, in_place));
    Buffers b;
    b.input = elements(n * count, elem, [&](size_t i) { return of(i, r); });
    if (in_place) {
      b.in_place = true;
    } else {
      b.output.assign(n * count * elem, Value{});
    }
    p.call.buffers.push_back(b);
    std::vector<Value> want;
    for (int q = 0; q < n; ++q) {
      const auto piece = elements(count, elem, [&](size_t i) { return of(r * count + i, q); });
      want.insert(want.end(), piece.begin(), piece.end());
    }
    p.want.push_back(want);
    p.out_bytes.push_back(n * count * elem);
  }
  return p;
}

// counts(s, d): elements rank s sends to rank d. Blocks laid out in reverse peer order.
template <class Counts>
Problem alltoallv_problem(int n, size_t elem, uint64_t half, Counts counts, bool in_place) {
  Problem p;
  std::vector<std::vector<size_t>> sc(n, std::vector<size_t>(n)), sd = sc, rc = sc, rd = sc;
  std::vector<size_t> in_total(n), out_total(n);
  for (int r = 0; r < n; ++r) {
    for (int q = n - 1; q >= 0; --q) {
      sc[r][q] = counts(r, q);
      sd[r][q] = in_total[r];
      in_total[r] += sc[r][q] + 2;
      rc[r][q] = counts(q, r);
      rd[r][q] = out_total[r];
      out_total[r] += rc[r][q] + 1;
    }
  }
  for (int r = 0; r < n; ++r) {
    // In place, one memory as large as the larger of the two layouts.
    const size_t memory = std::max(in_total[r], out_total[r]);
    p.call.programs.push_back(
        all_to_all_v(shape_of(n, r, elem, half), sc[r], sd[r], rc[r], rd[r], in_place));
    Buffers b;
    b.input = elements(in_place ? memory : in_total[r], elem, [&](size_t i) { return of(i, r); });
    if (in_place) {
      b.in_place = true;
    } else {
      b.output.assign(out_total[r] * elem, Value{});
    }
    p.call.buffers.push_back(b);
    std::vector<Value> want(in_place ? memory * elem : out_total[r] * elem, Value{});
    if (in_place) want = b.input;  // what no block overwrites stays as it was
    for (int q = 0; q < n; ++q) {
      const auto piece = elements(rc[r][q], elem, [&](size_t i) { return of(sd[q][r] + i, q); });
      std::copy(piece.begin(), piece.end(), want.begin() + static_cast<long>(rd[r][q] * elem));
    }
    p.want.push_back(want);
    p.out_bytes.push_back(want.size());
  }
  return p;
}

void expect_solved(Problem& p, int n, uint64_t half, const std::string& what) {
  std::vector<Call> calls{p.call};
  for (unsigned seed : {1u, 7u}) {
    calls[0] = p.call;
    ASSERT_EQ(model::run(n, half, calls, seed), "") << what << " seed " << seed;
    for (int r = 0; r < n; ++r) {
      if (p.want[r].empty()) continue;
      EXPECT_EQ(model::compare(model::output_of(calls[0].buffers[r], p.out_bytes[r]), p.want[r]),
                "")
          << what << ", rank " << r;
    }
  }
}

struct Sweep {
  std::vector<int> ranks{2, 3, 5, 8};
  std::vector<uint64_t> counts{0, 1, 7, 300};
  std::vector<size_t> elems{1, 2, 8};
};

// Halves from the smallest the builders take (one 16-byte piece per rank) up: small halves
// make many chunks, and chunks that end inside elements or slices.
std::vector<uint64_t> halves_for(int n) { return {uint64_t(n) * 16, 1000}; }

std::string label(const char* what, int n, size_t elem, uint64_t half, uint64_t count) {
  return std::string(what) + " n=" + std::to_string(n) + " elem=" + std::to_string(elem) +
         " half=" + std::to_string(half) + " count=" + std::to_string(count);
}

TEST(DevicePrograms, AllReduceEveryAlgorithmOpAndShape) {
  for (int n : Sweep().ranks) {
    for (size_t elem : {size_t{1}, size_t{4}, size_t{8}}) {
      for (uint64_t half : halves_for(n)) {
        for (uint64_t count : Sweep().counts) {
          for (auto algo : {AllReduceAlgorithm::OneShot, AllReduceAlgorithm::TwoShot}) {
            for (Reduction red : {Reduction{}, Reduction{true, false}, Reduction{false, true}}) {
              for (bool in_place : {false, true}) {
                Problem p = allreduce(n, elem, half, count, algo, red, in_place);
                expect_solved(p, n, half, label("allreduce", n, elem, half, count));
                if (HasFatalFailure()) return;
              }
            }
          }
        }
      }
    }
  }
}

TEST(DevicePrograms, BroadcastAndReduceFromEveryRoot) {
  for (int n : Sweep().ranks) {
    for (size_t elem : Sweep().elems) {
      for (uint64_t half : halves_for(n)) {
        for (uint64_t count : Sweep().counts) {
          for (int root : {0, n - 1, n / 2}) {
            for (bool in_place : {false, true}) {
              Problem b = broadcast_problem(n, elem, half, count, root, in_place);
              expect_solved(b, n, half, label("broadcast", n, elem, half, count));
              for (Reduction red : {Reduction{}, Reduction{true, true}}) {
                Problem r = reduce_problem(n, elem, half, count, root, red, in_place);
                expect_solved(r, n, half, label("reduce", n, elem, half, count));
              }
              if (HasFatalFailure()) return;
            }
          }
        }
      }
    }
  }
}

TEST(DevicePrograms, AllGatherReduceScatterAllToAll) {
  for (int n : Sweep().ranks) {
    for (size_t elem : Sweep().elems) {
      for (uint64_t half : halves_for(n)) {
        for (uint64_t count : Sweep().counts) {
          for (bool in_place : {false, true}) {
            Problem g = allgather_problem(n, elem, half, count, in_place);
            expect_solved(g, n, half, label("allgather", n, elem, half, count));
            for (Reduction red : {Reduction{}, Reduction{true, true}}) {
              Problem rs = reducescatter_problem(n, elem, half, count, red, in_place);
              expect_solved(rs, n, half, label("reducescatter", n, elem, half, count));
            }
            Problem a = alltoall_problem(n, elem, half, count, in_place);
            expect_solved(a, n, half, label("alltoall", n, elem, half, count));
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(DevicePrograms, VCollectivesWithUnevenAndEmptyBlocks) {
  for (int n : Sweep().ranks) {
    for (size_t elem : {size_t{1}, size_t{8}}) {
      for (uint64_t half : halves_for(n)) {
        for (bool in_place : {false, true}) {
          std::vector<size_t> counts(n);
          for (int q = 0; q < n; ++q) counts[q] = (q * 37) % 5 == 0 ? 0 : q * 41 + 3;
          Problem g = allgatherv_problem(n, elem, half, counts, in_place);
          expect_solved(g, n, half, label("allgatherv", n, elem, half, 0));
          // Rank s sends d a count only they agree on; some pairs send nothing at all.
          auto pairwise = [n](int s, int d) -> size_t {
            return (s + 2 * d) % 3 == 0 ? 0 : static_cast<size_t>((s * 31 + d * 17) % 97 + n);
          };
          Problem a = alltoallv_problem(n, elem, half, pairwise, in_place);
          expect_solved(a, n, half, label("alltoallv", n, elem, half, 0));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// A group of sends and receives: rank r sends to r+1 and r+2 (two messages to r+1), receives
// the matching ones, and sends one to itself.
TEST(DevicePrograms, SendRecvGroupsMatchInPostedOrder) {
  for (int n : {2, 3, 5, 8}) {
    for (uint64_t half : halves_for(n)) {
      Problem p;
      auto size = [](int s, int k) { return static_cast<size_t>(s * 13 + k * 101 + 5); };
      for (int r = 0; r < n; ++r) {
        std::vector<PointToPoint> ops;
        Buffers b;
        auto send = [&](int peer, int k) {
          ops.push_back({true, peer, size(r, k)});
          const auto id = static_cast<int64_t>(k * 100000);
          b.slots.push_back(elements(size(r, k), 1, [&](size_t i) { return of(id + i, r); }));
        };
        auto recv = [&](int peer, int k) {
          ops.push_back({false, peer, size(peer, k)});
          b.slots.emplace_back(size(peer, k), Value{});
        };
        recv((r + n - 1) % n, 0);
        send((r + 1) % n, 0);
        send((r + 1) % n, 1);
        send((r + 2) % n, 2);
        recv((r + n - 2) % n, 2);
        recv((r + n - 1) % n, 1);
        send(r, 3);
        recv(r, 3);
        p.call.programs.push_back(point_to_point(shape_of(n, r, 1, half), ops));
        p.call.buffers.push_back(b);
      }
      std::vector<Call> calls{p.call};
      ASSERT_EQ(model::run(n, half, calls), "") << "n=" << n << " half=" << half;
      for (int r = 0; r < n; ++r) {
        const auto& slots = calls[0].buffers[r].slots;
        auto expect = [&](size_t s, int from, int k) {
          const auto id = static_cast<int64_t>(k * 100000);
          EXPECT_EQ(model::compare(slots[s], elements(size(from, k), 1,
                                                      [&](size_t i) { return of(id + i, from); })),
                    "")
              << "n=" << n << " half=" << half << " rank " << r << " slot " << s;
        };
        // With n = 2 the sends to r+1 and r+2 both go to the one peer, in posted order.
        const int prev = (r + n - 1) % n, prev2 = (r + n - 2) % n;
        if (n > 2) {
          expect(0, prev, 0);
          expect(4, prev2, 2);
          expect(5, prev, 1);
        }
        expect(7, r, 3);
      }
    }
  }
}

TEST(DevicePrograms, BarrierAlone) {
  for (int n : Sweep().ranks) {
    Call c;
    for (int r = 0; r < n; ++r) {
      c.programs.push_back(barrier(shape_of(n, r, 1, 4096)));
      c.buffers.emplace_back();
    }
    std::vector<Call> calls{c, c, c};
    EXPECT_EQ(model::run(n, 4096, calls), "") << n;
  }
}

// One communicator's calls in a row, queued without any host synchronization: a call must not
// overwrite a scratch half a peer still reads for the previous one, whichever collectives they
// are (a sparse alltoallv after an allgather is the case the guard rule exists for).
TEST(DevicePrograms, CallsInARowShareFlagsAndScratch) {
  for (int n : {2, 3, 4, 7, 8}) {
    for (uint64_t half : {uint64_t(n) * 16, uint64_t{512}, uint64_t{32768}}) {
      for (unsigned seed : {1u, 2u, 3u}) {
        std::vector<Problem> problems;
        problems.push_back(allgather_problem(n, 4, half, 61, false));
        problems.push_back(alltoallv_problem(
            n, 1, half, [](int s, int d) -> size_t { return s == 0 && d == 1 ? 333 : 0; }, false));
        problems.push_back(allreduce(n, 8, half, 77, AllReduceAlgorithm::TwoShot, {}, true));
        problems.push_back(
            allreduce(n, 2, half, 300, AllReduceAlgorithm::OneShot, {false, true}, false));
        problems.push_back(broadcast_problem(n, 1, half, 999, n - 1, false));
        problems.push_back(reducescatter_problem(n, 4, half, 50, {}, false));
        problems.push_back(reduce_problem(n, 4, half, 123, 0, {}, false));
        problems.push_back(reduce_problem(n, 4, half, 100, n - 1, {true, false}, false));
        problems.push_back(reducescatter_problem(n, 4, half, 100, {true, false}, false));
        problems.push_back(reducescatter_problem(n, 4, half, 100, {true, false}, false));
        problems.push_back(alltoall_problem(n, 8, half, 40, true));
        problems.push_back(allgather_problem(n, 1, half, 201, true));
        std::vector<Call> calls;
        for (Problem& p : problems) calls.push_back(p.call);
        ASSERT_EQ(model::run(n, half, calls, seed), "") << "n=" << n << " half=" << half;
        for (size_t c = 0; c < calls.size(); ++c) {
          for (int r = 0; r < n; ++r) {
            if (problems[c].want[r].empty()) continue;
            EXPECT_EQ(
                model::compare(model::output_of(calls[c].buffers[r], problems[c].out_bytes[r]),
                               problems[c].want[r]),
                "")
                << "call " << c << " rank " << r << " n=" << n;
          }
        }
      }
    }
  }
}

// One communicator's calls in a row with its ranks queuing them on several streams: rank r
// queues call c on stream streams[r][c]. "" if the model found no problem and every Output is
// exact, else the first problem.
std::string run_on_streams(int n, uint64_t half, const std::vector<std::vector<int>>& streams,
                           const model::Options& options) {
  std::vector<Problem> problems;
  problems.push_back(allreduce(n, 4, half, 100, AllReduceAlgorithm::TwoShot, {}, false));
  problems.push_back(allgather_problem(n, 2, half, 37, false));
  // Only rank 0 sends, only to rank 1: the other ranks' programs are empty.
  problems.push_back(alltoallv_problem(
      n, 1, half, [](int s, int d) -> size_t { return s == 0 && d == 1 ? 50 : 0; }, false));
  problems.push_back(allreduce(n, 8, half, 20, AllReduceAlgorithm::OneShot, {false, true}, true));
  problems.push_back(reducescatter_problem(n, 4, half, 30, {true, false}, false));
  std::vector<Call> calls;
  for (size_t c = 0; c < problems.size(); ++c) {
    calls.push_back(problems[c].call);
    for (int r = 0; r < n; ++r) calls.back().streams.push_back(streams[r][c]);
  }
  if (std::string e = model::run(n, half, calls, options); !e.empty()) return e;
  for (size_t c = 0; c < calls.size(); ++c) {
    for (int r = 0; r < n; ++r) {
      if (problems[c].want[r].empty()) continue;
      const std::string e = model::compare(
          model::output_of(calls[c].buffers[r], problems[c].out_bytes[r]), problems[c].want[r]);
      if (!e.empty()) return "call " + std::to_string(c) + " rank " + std::to_string(r) + ": " + e;
    }
  }
  return "";
}

// Ways a rank may spread five calls over its streams: switching every call, runs of one stream
// then a third, one stream only, a new stream every call and back to the first.
const std::vector<std::vector<int>> kStreamPatterns{
    {0, 1, 0, 1, 0}, {1, 1, 0, 0, 2}, {0, 0, 0, 0, 0}, {3, 2, 1, 0, 3}};

// Rank r takes pattern (r + shift) % 4: every rank a different one, and each in turn.
std::vector<std::vector<int>> streams_for(int n, int shift) {
  std::vector<std::vector<int>> streams;
  for (int r = 0; r < n; ++r) streams.push_back(kStreamPatterns[(r + shift) % 4]);
  return streams;
}

// DeviceWorld::enqueue makes a program on another stream than the rank's previous one wait for
// its end: then the calls are as right as on one stream, however the ranks spread them.
TEST(DevicePrograms, CallsOnSeveralStreamsOrderedByTheirEnds) {
  for (int n : {2, 3, 4}) {
    for (uint64_t half : {uint64_t(n) * 16, uint64_t{512}}) {
      for (int shift = 0; shift < 4; ++shift) {
        for (unsigned seed = 1; seed <= 10; ++seed) {
          EXPECT_EQ(run_on_streams(n, half, streams_for(n, shift), {.seed = seed}), "")
              << "n=" << n << " half=" << half << " shift=" << shift << " seed=" << seed;
        }
      }
    }
  }
}

// Without that wait, two programs of a rank run at once on its scratch and flags: the model must
// see it, whatever interleaving it follows.
TEST(DeviceProgramModel, CatchesCallsOnSeveralStreamsLeftUnordered) {
  for (int n : {2, 3, 4}) {
    for (uint64_t half : {uint64_t(n) * 16, uint64_t{512}}) {
      for (int shift = 0; shift < 4; ++shift) {
        for (unsigned seed = 1; seed <= 20; ++seed) {
          const model::Options unordered{.seed = seed, .order_across_streams = false};
          EXPECT_NE(run_on_streams(n, half, streams_for(n, shift), unordered), "")
              << "n=" << n << " half=" << half << " shift=" << shift << " seed=" << seed;
        }
      }
    }
  }
}

// The model catches what the builders must not do.
TEST(DeviceProgramModel, CatchesAReadBeforeTheWait) {
  Call c;
  for (int r = 0; r < 2; ++r) {
    Program p;
    p.elem_size = 1;
    const Flag mine{Line::Data, 0, static_cast<int16_t>(r), static_cast<int16_t>(1 - r)};
    const Flag theirs{Line::Data, 0, static_cast<int16_t>(1 - r), static_cast<int16_t>(r)};
    p.copy(scratch(r, 0), input(), 8);
    p.signal({&mine, 1}, FlagState::Full);
    p.copy(output(), scratch(1 - r, 0), 8);  // before waiting for the peer's flag
    p.wait({&theirs, 1}, FlagState::Full);
    p.signal({&theirs, 1}, FlagState::Empty);
    c.programs.push_back(p);
    Buffers b;
    b.input = elements(8, 1, [&](size_t i) { return of(i, r); });
    b.output.assign(8, Value{});
    c.buffers.push_back(b);
  }
  std::vector<Call> calls{c};
  EXPECT_NE(model::run(2, 64, calls), "");
}

TEST(DeviceProgramModel, CatchesADeadlockAndAFullFlagLeftOver) {
  Call c;
  for (int r = 0; r < 2; ++r) {
    Program p;
    const Flag theirs{Line::Data, 0, static_cast<int16_t>(1 - r), static_cast<int16_t>(r)};
    p.wait({&theirs, 1}, FlagState::Full);  // both wait, nobody signals
    c.programs.push_back(p);
    c.buffers.emplace_back();
  }
  std::vector<Call> calls{c};
  EXPECT_NE(model::run(2, 64, calls).find("deadlock"), std::string::npos);

  Call d;
  for (int r = 0; r < 2; ++r) {
    Program p;
    const Flag mine{Line::Data, 0, static_cast<int16_t>(r), static_cast<int16_t>(1 - r)};
    p.signal({&mine, 1}, FlagState::Full);  // never consumed
    d.programs.push_back(p);
    d.buffers.emplace_back();
  }
  calls = {d};
  EXPECT_NE(model::run(2, 64, calls).find("still Full"), std::string::npos);
}

TEST(DevicePrograms, SplitCoversEveryByteOnce) {
  for (uint64_t total : {0, 1, 15, 16, 17, 1000, 4099}) {
    for (int parts : {1, 2, 3, 8}) {
      uint64_t next = 0;
      for (int p = 0; p < parts; ++p) {
        const Split s = split(total, parts, p, 4);
        EXPECT_EQ(s.lo, next);
        next += s.len;
      }
      EXPECT_EQ(next, total);
    }
  }
}

}  // namespace
}  // namespace ccl::algo::device
