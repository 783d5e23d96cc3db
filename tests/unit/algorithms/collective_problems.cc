// What each collective must leave in every rank's Output, as symbolic formulas (see
// schedule_verifier.h). Reductions expect Finalize applied exactly once.
#include <algorithm>
#include <utility>

#include "schedule_verifier.h"

namespace ccl::algo::verify {

namespace {

int64_t i64(size_t v) { return static_cast<int64_t>(v); }

RankSetup plain(size_t in, size_t out) {
  RankSetup r;
  r.input_elems = in;
  r.output_elems = out;
  return r;
}

// Expects every Output element outside s.expect's ranges (which must not overlap) to be garbage
// still: a schedule that writes where no block goes overwrites the caller's data.
void expect_gaps_untouched(RankSetup& s) {
  std::vector<std::pair<size_t, size_t>> covered;
  for (const Expectation& e : s.expect) covered.emplace_back(e.offset, e.offset + e.count);
  std::sort(covered.begin(), covered.end());
  size_t at = 0;
  for (const auto& [begin, end] : covered) {
    if (begin > at) s.expect.push_back({at, begin - at, Value::undefined()});
    at = std::max(at, end);
  }
  if (s.output_elems > at) s.expect.push_back({at, s.output_elems - at, Value::undefined()});
}

}  // namespace

Problem allreduce_problem(int nranks, size_t count, bool in_place) {
  Problem p;
  for (int r = 0; r < nranks; ++r) {
    RankSetup s = plain(count, count);
    s.in_place = in_place;
    if (count) s.expect.push_back({0, count, Value::reduced(nranks, 0, true)});
    p.ranks.push_back(std::move(s));
  }
  return p;
}

std::string verify_allreduce(const std::vector<Schedule>& schedules, int nranks, size_t count) {
  for (bool in_place : {false, true}) {
    Problem problem = allreduce_problem(nranks, count, in_place);
    problem.rendezvous = true;
    const std::string error = verify(schedules, problem);
    if (!error.empty()) return (in_place ? "in place: " : "") + error;
  }
  return "";
}

Problem broadcast_problem(int nranks, size_t count, int root, bool in_place) {
  Problem p;
  for (int r = 0; r < nranks; ++r) {
    RankSetup s = plain(count, count);
    s.in_place = in_place;
    // Only the root's sendbuff is given; in-place, a non-root's Input is its not-yet-received
    // Output, so reading it is as wrong.
    s.input_usable = r == root;
    if (count) s.expect.push_back({0, count, Value::input_of(root, 0)});
    p.ranks.push_back(std::move(s));
  }
  return p;
}

Problem reduce_problem(int nranks, size_t count, int root, bool in_place) {
  Problem p;
  for (int r = 0; r < nranks; ++r) {
    RankSetup s = plain(count, count);
    s.in_place = in_place && r == root;
    s.output_usable = r == root;  // non-roots' recvbuff may be NULL
    if (r == root && count) s.expect.push_back({0, count, Value::reduced(nranks, 0, true)});
    p.ranks.push_back(std::move(s));
  }
  return p;
}

Problem allgather_problem(int nranks, size_t sendcount, bool in_place) {
  Problem p;
  for (int r = 0; r < nranks; ++r) {
    RankSetup s = plain(sendcount, sendcount * nranks);
    s.in_place = in_place;  // sendbuff == recvbuff + rank * sendcount
    s.input_base = r * sendcount;
    for (int q = 0; q < nranks && sendcount; ++q) {
      // Output[q*c + i] = in_q[i]: relative to position x = q*c + i the delta is -q*c.
      s.expect.push_back({q * sendcount, sendcount, Value::input_of(q, -i64(q * sendcount))});
    }
    p.ranks.push_back(std::move(s));
  }
  return p;
}

Problem reducescatter_problem(int nranks, size_t recvcount, bool in_place) {
  Problem p;
  for (int r = 0; r < nranks; ++r) {
    RankSetup s = plain(recvcount * nranks, recvcount);
    s.in_place = in_place;  // recvbuff == sendbuff + rank * recvcount
    s.output_base = r * recvcount;
    if (recvcount) {
      s.expect.push_back({0, recvcount, Value::reduced(nranks, i64(r * recvcount), true)});
    }
    p.ranks.push_back(std::move(s));
  }
  return p;
}

Problem alltoall_problem(int nranks, size_t count) {
  Problem p;
  for (int r = 0; r < nranks; ++r) {
    RankSetup s = plain(count * nranks, count * nranks);
    for (int q = 0; q < nranks && count; ++q) {
      // Output block q of rank r is block r of rank q's Input.
      s.expect.push_back({q * count, count, Value::input_of(q, i64(r * count) - i64(q * count))});
    }
    p.ranks.push_back(std::move(s));
  }
  return p;
}

Problem allgatherv_problem(int nranks, std::span<const size_t> counts,
                           std::span<const size_t> displs, bool in_place) {
  size_t out_elems = 0;
  for (int q = 0; q < nranks; ++q) out_elems = std::max(out_elems, displs[q] + counts[q]);
  Problem p;
  for (int r = 0; r < nranks; ++r) {
    RankSetup s = plain(counts[r], out_elems);
    s.in_place = in_place;  // sendbuff == recvbuff + displs[rank]
    s.input_base = displs[r];
    for (int q = 0; q < nranks; ++q) {
      // Output[displs[q] + i] = in_q[i].
      if (counts[q])
        s.expect.push_back({displs[q], counts[q], Value::input_of(q, -i64(displs[q]))});
    }
    expect_gaps_untouched(s);
    p.ranks.push_back(std::move(s));
  }
  return p;
}

Problem alltoallv_problem(const Matrix& sendcounts, const Matrix& sdispls, const Matrix& rdispls) {
  const int nranks = static_cast<int>(sendcounts.size());
  Problem p;
  for (int r = 0; r < nranks; ++r) {
    RankSetup s;
    for (int q = 0; q < nranks; ++q) {
      s.input_elems = std::max(s.input_elems, sdispls[r][q] + sendcounts[r][q]);
      s.output_elems = std::max(s.output_elems, rdispls[r][q] + sendcounts[q][r]);
    }
    for (int q = 0; q < nranks; ++q) {
      // Output[rdispls[r][q] + i] = in_q[sdispls[q][r] + i].
      const size_t count = sendcounts[q][r];
      const size_t at = rdispls[r][q];
      if (count) s.expect.push_back({at, count, Value::input_of(q, i64(sdispls[q][r]) - i64(at))});
    }
    expect_gaps_untouched(s);
    p.ranks.push_back(std::move(s));
  }
  return p;
}

Problem barrier_problem(int nranks) {
  Problem p;
  p.ranks.resize(nranks);
  p.full_dependency = true;
  return p;
}

}  // namespace ccl::algo::verify
