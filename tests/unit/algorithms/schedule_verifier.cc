#include "schedule_verifier.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <sstream>

namespace ccl::algo::verify {

namespace {

// Where a region lives: user memory A (Input, or Input and Output when in-place), user memory B
// (Output, out-of-place) or the executor's scratch.
enum Storage { kMemA = 0, kMemB = 1, kScratch = 2 };

struct Place {
  int storage = kMemA;
  size_t offset = 0;
  size_t count = 0;
  bool operator==(const Place&) const = default;
  bool overlaps(const Place& o) const {
    return storage == o.storage && count && o.count && offset < o.offset + o.count &&
           o.offset < offset + count;
  }
};

using Bits = std::vector<uint64_t>;

struct Message {
  int from = 0;
  size_t round = 0, step = 0;  // of the sender, for error messages
  size_t count = 0;
  Runs data;
  Bits knows;  // ranks whose arrival the sender had heard of when posting
};

struct RankState {
  const Schedule* schedule = nullptr;
  const RankSetup* setup = nullptr;
  std::array<SymbolicBuffer, 3> mem;
  size_t round = 0;
  bool posted = false;
  std::vector<Step> steps;     // of the current round, decoded once when it is posted
  std::vector<bool> received;  // per step of the current round
  Bits knows;
  size_t unmatched_sends = 0;  // of the current round; rendezvous mode only
  bool finished() const { return round == schedule->round_count(); }
};

const char* buffer_name(Buffer b) {
  return b == Buffer::Input ? "Input" : b == Buffer::Output ? "Output" : "Scratch";
}

std::string region_str(const Region& r) {
  std::ostringstream out;
  out << buffer_name(r.buffer) << '[' << r.offset << ',' << r.offset + r.count << ')';
  return out.str();
}

std::string step_str(const Step& s) {
  static const char* kNames[] = {"Send", "Recv", "RecvReduce", "Copy", "Finalize"};
  const auto k = static_cast<size_t>(s.kind);
  std::string out = k < 5 ? kNames[k] : "BadKind";
  if (s.kind == StepKind::Send || s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce) {
    out += " peer=" + std::to_string(s.peer);
  }
  if (s.kind == StepKind::Send || s.kind == StepKind::RecvReduce || s.kind == StepKind::Copy) {
    out += " src=" + region_str(s.src);
  }
  if (s.kind != StepKind::Send) out += " dst=" + region_str(s.dst);
  return out;
}

class Verifier {
 public:
  Verifier(const std::vector<Schedule>& schedules, const Problem& problem)
      : n_(static_cast<int>(problem.ranks.size())), problem_(problem) {
    if (schedules.size() != problem.ranks.size()) {
      throw VerifyError{"got " + std::to_string(schedules.size()) + " schedules for " +
                        std::to_string(n_) + " ranks"};
    }
    ranks_.resize(n_);
    for (int r = 0; r < n_; ++r) init_rank(r, schedules[r]);
  }

  void run() {
    for (;;) {
      bool moved = false, done = true;
      for (int r = 0; r < n_; ++r) {
        moved |= advance(r);
        done &= ranks_[r].finished();
      }
      if (done) break;
      if (!moved) throw VerifyError{deadlock_report()};
    }
    check_channels_empty();
    for (int r = 0; r < n_; ++r) check_results(r);
  }

 private:
  void init_rank(int r, const Schedule& schedule) {
    RankState& k = ranks_[r];
    const RankSetup& s = problem_.ranks[r];
    k.schedule = &schedule;
    k.setup = &s;
    if (s.in_place) {
      k.mem[kMemA] =
          SymbolicBuffer(std::max(s.input_base + s.input_elems, s.output_base + s.output_elems));
    } else {
      k.mem[kMemA] = SymbolicBuffer(s.input_elems);
      k.mem[kMemB] = SymbolicBuffer(s.output_elems);
    }
    k.mem[kScratch] = SymbolicBuffer(schedule.scratch_elems);
    const size_t in_base = s.in_place ? s.input_base : 0;
    k.mem[kMemA].write(in_base, Runs{Run{s.input_elems, Value::input_of(r, 0)}});
    k.knows.assign((n_ + 63) / 64, 0);
    k.knows[r / 64] |= uint64_t{1} << (r % 64);
  }

  std::string where(int r, size_t step) const {
    const RankState& k = ranks_[r];
    std::ostringstream out;
    out << "rank " << r << " round " << k.round << " step " << step;
    if (k.round < k.schedule->round_count() && step < k.schedule->round(k.round).size()) {
      out << " (" << step_str(k.schedule->round(k.round)[step]) << ")";
    }
    return out.str();
  }

  // Bounds, NULL-able buffers and the Input-is-const rule; then where the region lives.
  Place resolve(int r, const Region& reg, bool write) const {
    const RankState& k = ranks_[r];
    const RankSetup& s = *k.setup;
    size_t limit = 0;
    bool usable = true;
    switch (reg.buffer) {
      case Buffer::Input:
        limit = s.input_elems, usable = s.input_usable;
        if (write) throw VerifyError{"writes to Input, which is the caller's const sendbuff"};
        break;
      case Buffer::Output:
        limit = s.output_elems, usable = s.output_usable;
        break;
      case Buffer::Scratch:
        limit = k.schedule->scratch_elems;
        break;
      default:
        throw VerifyError{"invalid buffer"};
    }
    if (reg.count > limit || reg.offset > limit - reg.count) {
      throw VerifyError{region_str(reg) + " is out of bounds (" + std::to_string(limit) +
                        " elements)"};
    }
    if (reg.count && !usable) {
      throw VerifyError{"uses " + std::string(buffer_name(reg.buffer)) +
                        ", which this rank's caller may pass as NULL"};
    }
    if (reg.buffer == Buffer::Scratch) return Place{kScratch, reg.offset, reg.count};
    if (!s.in_place) {
      return Place{reg.buffer == Buffer::Input ? kMemA : kMemB, reg.offset, reg.count};
    }
    const size_t base = reg.buffer == Buffer::Input ? s.input_base : s.output_base;
    return Place{kMemA, base + reg.offset, reg.count};
  }

  void check_peer(int r, int peer) const {
    if (peer < 0 || peer >= n_ || peer == r) {
      throw VerifyError{"invalid peer " + std::to_string(peer)};
    }
  }

  // Validates every step of the current round and that concurrent steps do not race.
  void check_round(int r) const {
    const std::vector<Step>& round = ranks_[r].steps;
    struct Access {
      Place place;
      bool write;
      size_t step;
    };
    std::vector<Access> acc;
    for (size_t i = 0; i < round.size(); ++i) {
      const Step& st = round[i];
      try {
        switch (st.kind) {
          case StepKind::Send:
            check_peer(r, st.peer);
            acc.push_back({resolve(r, st.src, false), false, i});
            break;
          case StepKind::Recv:
            check_peer(r, st.peer);
            acc.push_back({resolve(r, st.dst, true), true, i});
            break;
          case StepKind::RecvReduce:
          case StepKind::Copy: {
            if (st.kind == StepKind::RecvReduce) check_peer(r, st.peer);
            if (st.src.count != st.dst.count) throw VerifyError{"src and dst sizes differ"};
            const Place src = resolve(r, st.src, false), dst = resolve(r, st.dst, true);
            if (st.kind == StepKind::Copy && src == dst) break;  // aliased copy: a no-op
            if (src.overlaps(dst) && !(src == dst)) throw VerifyError{"src and dst overlap"};
            acc.push_back({src, false, i});
            acc.push_back({dst, true, i});
            break;
          }
          case StepKind::Finalize:
            acc.push_back({resolve(r, st.dst, true), true, i});
            break;
          default:
            throw VerifyError{"invalid step kind"};
        }
      } catch (const VerifyError& e) {
        throw VerifyError{where(r, i) + ": " + e.what};
      }
    }
    for (size_t a = 0; a < acc.size(); ++a) {
      for (size_t b = a + 1; b < acc.size(); ++b) {
        if (acc[a].step != acc[b].step && (acc[a].write || acc[b].write) &&
            acc[a].place.overlaps(acc[b].place)) {
          throw VerifyError{where(r, acc[a].step) + " and step " + std::to_string(acc[b].step) +
                            " touch the same memory in one round, one of them writing"};
        }
      }
    }
  }

  Runs read(int r, const Region& reg) {
    const Place p = resolve(r, reg, false);
    return ranks_[r].mem[p.storage].read(p.offset, p.count);
  }
  void write(int r, const Region& reg, const Runs& runs) {
    const Place p = resolve(r, reg, true);
    ranks_[r].mem[p.storage].write(p.offset, runs);
  }

  void post(int r) {
    RankState& k = ranks_[r];
    const Schedule::Round decoded = k.schedule->round(k.round);
    k.steps.assign(decoded.begin(), decoded.end());
    check_round(r);
    const std::vector<Step>& round = k.steps;
    k.received.assign(round.size(), true);
    for (size_t i = 0; i < round.size(); ++i) {
      const Step& st = round[i];
      try {
        if (st.kind == StepKind::Send) {
          channels_[{r, st.peer}].push_back(
              Message{r, k.round, i, st.src.count, read(r, st.src), k.knows});
          if (problem_.rendezvous) ++k.unmatched_sends;
        } else if (st.kind == StepKind::Copy) {
          if (!(resolve(r, st.src, false) == resolve(r, st.dst, true))) {
            write(r, st.dst, read(r, st.src));
          }
        } else if (st.kind == StepKind::Finalize) {
          Runs runs = read(r, st.dst);
          for (Run& run : runs) {
            if (!run.value.defined) throw VerifyError{"Finalize of garbage"};
            if (run.value.finalized) throw VerifyError{"Finalize of already finalized data"};
            run.value.finalized = true;
          }
          write(r, st.dst, runs);
        } else {
          k.received[i] = false;
        }
      } catch (const VerifyError& e) {
        throw VerifyError{where(r, i) + ": " + e.what};
      }
    }
    k.posted = true;
  }

  // Matches the round's pending receives, in step order per peer. True when all are done.
  bool receive(int r, bool& moved) {
    RankState& k = ranks_[r];
    const std::vector<Step>& round = k.steps;
    std::vector<int> blocked;  // peers with an earlier receive still unmatched
    bool all = true;
    for (size_t i = 0; i < round.size(); ++i) {
      if (k.received[i]) continue;
      const Step& st = round[i];
      auto ch = channels_.find({st.peer, r});
      if (std::find(blocked.begin(), blocked.end(), st.peer) != blocked.end() ||
          ch == channels_.end() || ch->second.empty()) {
        blocked.push_back(st.peer);
        all = false;
        continue;
      }
      Message m = std::move(ch->second.front());
      ch->second.pop_front();
      try {
        if (m.count != st.dst.count) {
          throw VerifyError{"receives " + std::to_string(st.dst.count) + " elements but rank " +
                            std::to_string(st.peer) + " sent " + std::to_string(m.count) +
                            " (its round " + std::to_string(m.round) + " step " +
                            std::to_string(m.step) + ")"};
        }
        if (st.kind == StepKind::Recv) {
          write(r, st.dst, m.data);
        } else {
          write(r, st.dst, combine_runs(read(r, st.src), m.data));
        }
      } catch (const VerifyError& e) {
        throw VerifyError{where(r, i) + ": " + e.what};
      }
      for (size_t w = 0; w < k.knows.size(); ++w) k.knows[w] |= m.knows[w];
      k.received[i] = true;
      if (problem_.rendezvous) --ranks_[m.from].unmatched_sends;
      moved = true;
    }
    return all;
  }

  // Runs rank r as far as it can go now. True if anything happened.
  bool advance(int r) {
    RankState& k = ranks_[r];
    bool moved = false;
    while (!k.finished()) {
      if (!k.posted) {
        post(r);
        moved = true;
      }
      if (!receive(r, moved) || k.unmatched_sends != 0) break;
      ++k.round;
      k.posted = false;
      moved = true;
    }
    return moved;
  }

  std::string deadlock_report() const {
    std::ostringstream out;
    out << "deadlock:";
    for (int r = 0; r < n_; ++r) {
      const RankState& k = ranks_[r];
      if (k.finished()) continue;
      out << " [rank " << r << " round " << k.round << " waits for";
      const Schedule::Round round = k.schedule->round(k.round);
      for (size_t i = 0; i < round.size(); ++i) {
        if (!k.received[i]) out << " {" << step_str(round[i]) << "}";
      }
      if (k.unmatched_sends) out << " and " << k.unmatched_sends << " send(s) to be received";
      out << "]";
    }
    return out.str();
  }

  void check_channels_empty() const {
    for (const auto& [pair, queue] : channels_) {
      if (queue.empty()) continue;
      const Message& m = queue.front();
      throw VerifyError{"rank " + std::to_string(pair.first) + " sent " +
                        std::to_string(queue.size()) + " message(s) to rank " +
                        std::to_string(pair.second) + " never received (first: round " +
                        std::to_string(m.round) + " step " + std::to_string(m.step) + ", " +
                        std::to_string(m.count) + " elements)"};
    }
  }

  void check_results(int r) {
    const RankSetup& s = problem_.ranks[r];
    for (const Expectation& e : s.expect) {
      const Runs runs = read(r, Region{Buffer::Output, e.offset, e.count});
      size_t at = e.offset;
      for (const Run& run : runs) {
        // Runs are relative to their first element; the expectation to each element itself.
        const Value got = run.value.shifted(-static_cast<int64_t>(at));
        if (!(got == e.value)) {
          throw VerifyError{"rank " + std::to_string(r) + " Output[" + std::to_string(at) + "," +
                            std::to_string(at + run.len) + ") holds " + got.describe() +
                            ", expected " + e.value.describe()};
        }
        at += run.len;
      }
    }
    if (problem_.full_dependency) {
      for (int q = 0; q < n_; ++q) {
        if (!(ranks_[r].knows[q / 64] >> (q % 64) & 1)) {
          throw VerifyError{"rank " + std::to_string(r) +
                            " can complete before hearing (even indirectly) from rank " +
                            std::to_string(q)};
        }
      }
    }
  }

  int n_;
  const Problem& problem_;
  std::vector<RankState> ranks_;
  std::map<std::pair<int, int>, std::deque<Message>> channels_;  // (from, to) -> in flight
};

}  // namespace

std::string verify(const std::vector<Schedule>& schedules, const Problem& problem) {
  try {
    Verifier v(schedules, problem);
    v.run();
  } catch (const VerifyError& e) {
    return e.what;
  }
  return "";
}

}  // namespace ccl::algo::verify
