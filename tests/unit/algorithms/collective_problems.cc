// What each collective must leave in every rank's Output, as symbolic formulas (see
// schedule_verifier.h). Reductions expect Finalize applied exactly once.
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

Problem barrier_problem(int nranks) {
  Problem p;
  p.ranks.resize(nranks);
  p.full_dependency = true;
  return p;
}

}  // namespace ccl::algo::verify
