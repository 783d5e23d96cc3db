#include "numeric_run.h"

#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <utility>

namespace ccl::algo::test {

namespace {

struct RankMem {
  std::vector<double> input, output, scratch;
  bool in_place = false;
  double* at(const Region& r) {
    std::vector<double>& v = r.buffer == Buffer::Scratch              ? scratch
                             : r.buffer == Buffer::Output || in_place ? output
                                                                      : input;
    if (r.offset + r.count > v.size()) return nullptr;
    return v.data() + r.offset;
  }
};

}  // namespace

NumericRun run_numeric_allreduce(const std::vector<Schedule>& schedules,
                                 const std::vector<std::vector<double>>& inputs, bool in_place) {
  const int n = static_cast<int>(schedules.size());
  NumericRun result;
  std::vector<RankMem> mem(n);
  for (int r = 0; r < n; ++r) {
    mem[r].in_place = in_place;
    mem[r].input = inputs[r];
    mem[r].output = in_place ? inputs[r] : std::vector<double>(inputs[r].size(), NAN);
    mem[r].scratch.assign(schedules[r].scratch_elems, NAN);
  }
  std::map<std::pair<int, int>, std::deque<std::vector<double>>> channels;  // (from, to)
  std::vector<size_t> round(n, 0);
  std::vector<bool> posted(n, false);
  std::vector<std::vector<bool>> done(n);
  const auto fail = [&](int r, const std::string& what) {
    result.error = "rank " + std::to_string(r) + " round " + std::to_string(round[r]) + ": " + what;
    return result;
  };
  for (;;) {
    bool moved = false, finished = true;
    for (int r = 0; r < n; ++r) {
      const Schedule& schedule = schedules[r];
      while (round[r] < schedule.round_count()) {
        const Schedule::Round steps = schedule.round(round[r]);
        if (!posted[r]) {
          done[r].assign(steps.size(), true);
          for (size_t i = 0; i < steps.size(); ++i) {
            const Step st = steps[i];
            double* src = mem[r].at(st.src);
            double* dst = mem[r].at(st.dst);
            if (st.kind == StepKind::Send) {
              if (src == nullptr) return fail(r, "send out of bounds");
              channels[{r, st.peer}].emplace_back(src, src + st.src.count);
            } else if (st.kind == StepKind::Copy) {
              if (src == nullptr || dst == nullptr) return fail(r, "copy out of bounds");
              for (size_t k = 0; k < st.dst.count; ++k) dst[k] = src[k];
            } else if (st.kind == StepKind::Finalize) {
              if (dst == nullptr) return fail(r, "finalize out of bounds");
              for (size_t k = 0; k < st.dst.count; ++k) dst[k] /= n;
            } else {
              done[r][i] = false;
            }
          }
          posted[r] = true;
          moved = true;
        }
        bool all = true;
        for (size_t i = 0; i < steps.size(); ++i) {
          if (done[r][i]) continue;
          const Step st = steps[i];
          auto ch = channels.find({st.peer, r});
          // Receives from one peer match in step order: stop at the first one still waiting.
          bool earlier_waiting = false;
          for (size_t j = 0; j < i; ++j) earlier_waiting |= !done[r][j] && steps[j].peer == st.peer;
          if (earlier_waiting || ch == channels.end() || ch->second.empty()) {
            all = false;
            continue;
          }
          std::vector<double> msg = std::move(ch->second.front());
          ch->second.pop_front();
          double* dst = mem[r].at(st.dst);
          const double* src = st.kind == StepKind::RecvReduce ? mem[r].at(st.src) : nullptr;
          if (dst == nullptr || msg.size() != st.dst.count ||
              (st.kind == StepKind::RecvReduce && src == nullptr)) {
            return fail(r, "bad receive");
          }
          for (size_t k = 0; k < msg.size(); ++k) dst[k] = src ? src[k] + msg[k] : msg[k];
          done[r][i] = true;
          moved = true;
        }
        if (!all) break;
        ++round[r];
        posted[r] = false;
      }
      finished &= round[r] == schedule.round_count();
    }
    if (finished) break;
    if (!moved) return fail(0, "deadlock");
  }
  for (int r = 0; r < n; ++r) result.output.push_back(std::move(mem[r].output));
  return result;
}

std::vector<double> spread_values(int rank, size_t count) {
  std::mt19937 rng(977u * static_cast<unsigned>(rank) + static_cast<unsigned>(count));
  std::vector<double> v(count);
  for (double& x : v) {
    const int exponent = static_cast<int>(rng() % 41) - 20;
    const double mantissa = 1.0 + static_cast<double>(rng() % 1000003) / 1000003.0;
    x = std::ldexp(rng() % 2 ? mantissa : -mantissa, exponent);
  }
  return v;
}

}  // namespace ccl::algo::test
