#include "measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "report.h"

namespace ccl_check {

namespace {

using Clock = std::chrono::steady_clock;

double gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

// One call of `collective` moving `bytes` (nccl-tests' size) of float32, blocking.
cclResult_t call(const std::string& c, ccl::Communicator& comm, const float* send, float* recv,
                 size_t bytes) {
  const int n = comm.size();
  const size_t count = bytes / sizeof(float);
  cclComm_t h = comm.get();
  if (c == "allreduce") return cclAllReduce(send, recv, count, cclFloat32, cclSum, h, nullptr);
  if (c == "broadcast") return cclBroadcast(send, recv, count, cclFloat32, 0, h, nullptr);
  if (c == "reduce") return cclReduce(send, recv, count, cclFloat32, cclSum, 0, h, nullptr);
  const size_t per_rank = count / static_cast<size_t>(n);
  if (c == "allgather") return cclAllGather(send, recv, per_rank, cclFloat32, h, nullptr);
  if (c == "reducescatter") {
    return cclReduceScatter(send, recv, per_rank, cclFloat32, cclSum, h, nullptr);
  }
  if (c == "alltoall") return cclAlltoAll(send, recv, per_rank, cclFloat32, h, nullptr);
  throw std::invalid_argument("ccl-check: unknown collective " + c);
}

void check(cclResult_t r, const char* what, ccl::Communicator& comm) {
  ccl::detail::check(r, what, comm.get());
}

// The slowest rank's value: a collective's time is what its slowest member saw.
double slowest(ccl::Communicator& comm, double mine) {
  std::vector<double> v = {mine};
  comm.all_reduce(std::span<double>(v), cclMax);
  return v[0];
}

// The median time (seconds) of `times` calls of fn, each timed alone: one descheduled moment
// does not make a link slow.
template <class F>
double median_seconds(int times, F&& fn) {
  std::vector<double> seconds;
  for (int i = 0; i < std::max(1, times); ++i) {
    const auto t0 = Clock::now();
    fn();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(seconds.begin(),
                   seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2),
                   seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

double busbw_factor(const std::string& c, int n) {
  if (c == "allreduce") return 2.0 * (n - 1) / n;
  if (c == "broadcast" || c == "reduce") return 1.0;
  return static_cast<double>(n - 1) / n;
}

std::vector<size_t> sweep_sizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    sizes.push_back(bytes);
    if (bytes > o.max_bytes / o.factor) break;  // no overflow past max
  }
  return sizes;
}

std::vector<SweepPoint> run_sweep(ccl::Communicator& comm, const Options& o,
                                  const std::function<void(const std::string&)>& on_point) {
  const int n = comm.size();
  std::vector<float> send(o.max_bytes / sizeof(float) + 1), recv(send.size());
  std::vector<SweepPoint> points;
  for (const std::string& c : o.collectives) {
    for (const size_t bytes : sweep_sizes(o)) {
      if (on_point) on_point(c + " " + size_text(bytes));
      // Sizes that split evenly over the ranks (as nccl-tests rounds them), at least one element.
      const size_t unit =
          sizeof(float) *
          static_cast<size_t>(c == "allreduce" || c == "broadcast" || c == "reduce" ? 1 : n);
      const size_t size = std::max(unit, bytes / unit * unit);
      std::fill(send.begin(), send.begin() + static_cast<std::ptrdiff_t>(size / 4),
                static_cast<float>(comm.rank() + 1));
      // Large sizes take fewer calls (at most 256 MiB moved per timing), as nccl-tests users
      // shorten their sweeps.
      const int iters = static_cast<int>(
          std::clamp<size_t>((size_t{256} << 20) / size, 2, static_cast<size_t>(o.iters)));
      for (int w = 0; w < std::min(o.warmup, iters); ++w) {
        check(call(c, comm, send.data(), recv.data(), size), c.c_str(), comm);
      }
      SweepPoint p{.collective = c, .bytes = size};
      std::vector<double> times;
      auto once = [&] {
        comm.barrier();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i)
          check(call(c, comm, send.data(), recv.data(), size), c.c_str(), comm);
        const double us =
            std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
        times.push_back(slowest(comm, us));
      };
      for (int r = 0; r < o.repeats; ++r) once();
      // A size whose repeats disagree beyond the tolerance runs its repeats again, once, before
      // its numbers may fail a threshold: one noisy moment is not a slow cluster.
      auto spread = [&] {
        const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
        return *lo > 0 ? *hi / *lo - 1.0 : 0.0;
      };
      if (o.repeats > 1 && spread() > o.self_tolerance) {
        times.clear();
        for (int r = 0; r < o.repeats; ++r) once();
      }
      p.runs = static_cast<int>(times.size());
      std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                       times.end());
      p.time_us = times[times.size() / 2];
      p.algbw_gbps = gbps(static_cast<double>(size), p.time_us * 1e-6);
      p.busbw_gbps = p.algbw_gbps * busbw_factor(c, n);
      if (c == "allreduce") {
        const float want = static_cast<float>(n) * static_cast<float>(n + 1) / 2.0f;
        bool ok = true;
        for (size_t i = 0; i < size / 4; ++i) ok = ok && recv[i] == want;
        std::vector<double> all_ok = {ok ? 1.0 : 0.0};
        comm.all_reduce(std::span<double>(all_ok), cclMin);
        p.correct = all_ok[0] == 1.0;
      }
      points.push_back(p);
    }
  }
  return points;
}

std::vector<PairResult> measure_round(ccl::Communicator& comm, const std::vector<RankPair>& round,
                                      const Options& o) {
  const int me = comm.rank();
  int partner = -1;
  for (const auto& [a, b] : round) {
    if (a == me) partner = b;
    if (b == me) partner = a;
  }
  // Each pair's numbers, filled by its lower rank, summed over the ranks so that all have them.
  std::vector<double> latency(round.size(), 0.0), bandwidth(round.size(), 0.0);
  comm.barrier();
  if (partner >= 0) {
    std::vector<float> small(2), out(o.pair_bytes / sizeof(float)), in(out.size());
    const bool first = me < partner;
    auto pingpong = [&] {
      if (first) {
        comm.send(std::span<const float>(small), partner);
        comm.recv(std::span<float>(small), partner);
      } else {
        comm.recv(std::span<float>(small), partner);
        comm.send(std::span<const float>(small), partner);
      }
    };
    for (int w = 0; w < 3; ++w) pingpong();
    const double one_way = median_seconds(std::max(5, o.pair_iters * 5), pingpong) * 1e6 / 2.0;
    auto both_ways = [&] {
      ccl::Group group;
      comm.send(std::span<const float>(out), partner);
      comm.recv(std::span<float>(in), partner);
      group.end();
    };
    both_ways();  // warm-up
    const double gbps = static_cast<double>(out.size() * sizeof(float)) /
                        median_seconds(o.pair_iters, both_ways) / 1e9;
    for (size_t i = 0; i < round.size(); ++i) {
      if (round[i].first == me) {
        latency[i] = one_way;
        bandwidth[i] = gbps;
      }
    }
  }
  comm.all_reduce(std::span<double>(latency), cclSum);
  comm.all_reduce(std::span<double>(bandwidth), cclSum);
  std::vector<PairResult> out;
  for (size_t i = 0; i < round.size(); ++i) out.push_back({round[i], latency[i], bandwidth[i]});
  return out;
}

RingResult measure_ring(ccl::Communicator& comm, const Options& o) {
  const int n = comm.size();
  const int me = comm.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<float> out(o.pair_bytes / sizeof(float)), in(out.size());
  auto hop = [&] {
    ccl::Group group;
    comm.send(std::span<const float>(out), next);
    comm.recv(std::span<float>(in), prev);
    group.end();
  };
  comm.barrier();
  hop();  // warm-up
  const double mine = median_seconds(o.pair_iters, hop);
  // The slowest median, and whose it was (the lowest rank among equals).
  std::vector<double> times(static_cast<size_t>(n), 0.0);
  times[static_cast<size_t>(me)] = mine;
  comm.all_reduce(std::span<double>(times), cclSum);
  const auto slowest = std::max_element(times.begin(), times.end());
  RingResult r;
  r.bytes = out.size() * sizeof(float);
  r.time_us = *slowest * 1e6;
  r.bandwidth_gbps = gbps(static_cast<double>(r.bytes), *slowest);
  r.slowest_rank = static_cast<int>(slowest - times.begin());
  return r;
}

}  // namespace ccl_check
