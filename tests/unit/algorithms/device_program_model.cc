#include "device_program_model.h"

#include <algorithm>
#include <array>
#include <random>
#include <sstream>

namespace ccl::algo::device::model {

std::string describe(const Value& v) {
  std::ostringstream s;
  s << "{index " << v.index << " ranks 0x" << std::hex << v.ranks << " scaled 0x" << v.scaled
    << std::dec << " divides " << v.divides << " byte " << v.byte << "}";
  return s.str();
}

std::vector<Value> output_of(const Buffers& b, size_t bytes) {
  const std::vector<Value>& memory = b.in_place ? b.input : b.output;
  const size_t at = b.in_place ? b.output_offset : 0;
  return std::vector<Value>(memory.begin() + static_cast<long>(at),
                            memory.begin() + static_cast<long>(at + bytes));
}

std::string compare(const std::vector<Value>& got, const std::vector<Value>& want) {
  if (got.size() != want.size()) return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i])) {
      return "byte " + std::to_string(i) + ": " + describe(got[i]) + ", want " + describe(want[i]);
    }
  }
  return "";
}

namespace {

using Clock = std::vector<uint32_t>;  // per stream of the model

// One byte of memory with what happens-before needs to know about its accesses.
struct Cell {
  Value value;
  int writer = -1;  // the stream; -1: written by the host before every call
  uint32_t write_clock = 0;
  std::vector<uint32_t> reads;  // per stream, the clock of its last read since the write (0: none)
};

struct FlagCell {
  FlagState state = FlagState::Empty;
  Clock clock;
};

constexpr size_t kNoCall = ~size_t{0};

int stream_of(const Call& c, int rank) { return c.streams.empty() ? 0 : c.streams[rank]; }

// Every (rank, stream) is a stream of the model, numbered by rank, then stream: with one stream
// per rank, stream r is rank r's.
class Machine {
 public:
  Machine(int nranks, uint64_t half, std::vector<Call>& calls, bool order_across_streams)
      : n_(nranks),
        half_(half),
        calls_(calls),
        ends_(calls.size(), std::vector<Clock>(nranks)),
        flags_(flags_per_page(nranks)) {
    for (int r = 0; r < n_; ++r) {
      std::vector<int> streams;
      for (const Call& c : calls_) streams.push_back(stream_of(c, r));
      if (streams.empty()) streams.push_back(0);
      std::sort(streams.begin(), streams.end());
      streams.erase(std::unique(streams.begin(), streams.end()), streams.end());
      for (int s : streams) {
        Actor& x = actors_.emplace_back();
        x.rank = r;
        x.stream = s;
      }
    }
    for (int r = 0; r < n_; ++r) {
      size_t previous = kNoCall;
      int previous_stream = 0;
      for (size_t c = 0; c < calls_.size(); ++c) {
        if (calls_[c].programs[r].ops().empty()) continue;  // orders nothing of its own
        const int s = stream_of(calls_[c], r);
        const bool waits = order_across_streams && previous != kNoCall && previous_stream != s;
        actors_[actor(r, s)].jobs.push_back({c, waits ? previous : kNoCall});
        previous = c;
        previous_stream = s;
      }
    }
    const size_t streams = actors_.size();
    clocks_.assign(streams, Clock(streams, 0));
    for (FlagCell& f : flags_) f.clock.assign(streams, 0);
    scratch_.resize(n_);
    for (auto& halves : scratch_) {
      for (auto& h : halves) h = cells(std::vector<Value>(half_));
    }
    memory_.resize(calls_.size());
    for (size_t c = 0; c < calls_.size(); ++c) {
      memory_[c].resize(n_);
      for (int r = 0; r < n_; ++r) {
        Buffers& b = calls_[c].buffers[r];
        Memory& m = memory_[c][r];
        m.input = cells(b.input);
        m.output = cells(b.output);
        for (const auto& s : b.slots) m.slots.push_back(cells(s));
        m.temp = cells(std::vector<Value>(calls_[c].programs[r].temp_bytes));
      }
    }
  }

  std::string run(unsigned seed) {
    std::mt19937 random(seed);
    std::vector<int> order(actors_.size());
    for (size_t a = 0; a < order.size(); ++a) order[a] = static_cast<int>(a);
    for (;;) {
      bool moved = false, left = false;
      std::shuffle(order.begin(), order.end(), random);
      for (int a : order) {
        // A few operations of this stream at a time, so that streams interleave.
        for (int burst = 1 + static_cast<int>(random() % 3); burst > 0; --burst) {
          if (done(a)) break;
          left = true;
          const Step step = step_of(a);
          if (!ready(a, step)) break;
          if (std::string e = execute(a, step); !e.empty()) return e;
          moved = true;
          advance(a);
        }
        left = left || !done(a);
      }
      if (!left) break;
      if (!moved) return deadlock();
    }
    for (size_t i = 0; i < flags_.size(); ++i) {
      if (flags_[i].state != FlagState::Empty) {
        return "flag " + std::to_string(i) + " is still Full after every call";
      }
    }
    for (size_t c = 0; c < calls_.size(); ++c) {
      for (int r = 0; r < n_; ++r) {
        Buffers& b = calls_[c].buffers[r];
        b.input = values(memory_[c][r].input);
        b.output = values(memory_[c][r].output);
        for (size_t s = 0; s < b.slots.size(); ++s) b.slots[s] = values(memory_[c][r].slots[s]);
      }
    }
    return "";
  }

 private:
  struct Memory {
    std::vector<Cell> input, output, temp;
    std::vector<std::vector<Cell>> slots;
  };
  struct Step {
    size_t call = 0;
    size_t op = 0;
    size_t after = kNoCall;  // op 0: the call of this rank whose end it waits for
  };
  struct Job {
    size_t call = 0;
    size_t after = kNoCall;
  };
  struct Actor {
    int rank = 0;
    int stream = 0;
    std::vector<Job> jobs;  // the rank's programs on this stream, in call order, none empty
    size_t job = 0;         // the next operation: jobs[job]'s op `op`
    size_t op = 0;
  };

  int actor(int r, int s) const {
    for (size_t a = 0; a < actors_.size(); ++a) {
      if (actors_[a].rank == r && actors_[a].stream == s) return static_cast<int>(a);
    }
    return -1;
  }

  std::vector<Cell> cells(const std::vector<Value>& values) const {
    std::vector<Cell> c(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      c[i].value = values[i];
      c[i].reads.assign(actors_.size(), 0);
    }
    return c;
  }
  static std::vector<Value> values(const std::vector<Cell>& cells) {
    std::vector<Value> v(cells.size());
    for (size_t i = 0; i < cells.size(); ++i) v[i] = cells[i].value;
    return v;
  }

  bool done(int a) const { return actors_[a].job >= actors_[a].jobs.size(); }
  Step step_of(int a) const {
    const Actor& x = actors_[a];
    const Job& job = x.jobs[x.job];
    return {job.call, x.op, job.after};
  }
  void advance(int a) {
    Actor& x = actors_[a];
    const size_t call = x.jobs[x.job].call;
    if (++x.op >= calls_[call].programs[x.rank].ops().size()) {
      ends_[call][x.rank] = clocks_[a];
      x.op = 0;
      ++x.job;
    }
  }
  const Program& program(int a, const Step& s) const {
    return calls_[s.call].programs[actors_[a].rank];
  }

  // "rank r", and its stream where ranks have several.
  std::string who(int a) const {
    const Actor& x = actors_[a];
    const bool several = static_cast<int>(actors_.size()) > n_;
    return "rank " + std::to_string(x.rank) +
           (several ? " stream " + std::to_string(x.stream) : std::string());
  }
  std::string where(int a, const Step& s) const {
    return who(a) + ", call " + std::to_string(s.call) + ", op " + std::to_string(s.op);
  }

  FlagCell& flag(const Flag& f) { return flags_[flag_index(f, n_)]; }

  // Whether the program's start still waits for the end of the rank's previous one.
  bool before_start(int a, const Step& s) const {
    return s.op == 0 && s.after != kNoCall && ends_[s.after][actors_[a].rank].empty();
  }
  bool ready(int a, const Step& s) {
    if (before_start(a, s)) return false;
    const Program& p = program(a, s);
    const Op& op = p.ops()[s.op];
    if (op.kind != OpKind::Wait) return true;
    for (const Flag& f : p.flags(op)) {
      if (flag(f).state != op.state) return false;
    }
    return true;
  }

  std::string deadlock() const {
    std::ostringstream o;
    o << "deadlock:";
    for (int a = 0; a < static_cast<int>(actors_.size()); ++a) {
      if (done(a)) {
        o << " " << who(a) << " done;";
      } else if (const Step s = step_of(a); before_start(a, s)) {
        o << " " << where(a, s) << " waits for call " << s.after << "'s end;";
      } else {
        o << " " << where(a, s) << " waits;";
      }
    }
    return o.str();
  }

  // The cells a Ref names on rank r in call c, `bytes` long; nullptr with `error` set if out of
  // bounds or not this rank's to write.
  Cell* resolve(int r, size_t c, const Ref& ref, uint64_t bytes, bool write, std::string* error) {
    Memory& m = memory_[c][r];
    const Buffers& b = calls_[c].buffers[r];
    std::vector<Cell>* space = nullptr;
    uint64_t base = 0;
    switch (ref.space) {
      case Space::Input:
        if (write) {
          *error = "writes the input (sendbuff is const)";
          return nullptr;
        }
        space = &m.input;
        base = b.in_place ? b.input_offset : 0;
        break;
      case Space::Output:
        space = b.in_place ? &m.input : &m.output;
        base = b.in_place ? b.output_offset : 0;
        break;
      case Space::Scratch:
        if (ref.rank < 0 || ref.rank >= n_ || ref.half >= kHalves) {
          *error = "names no scratch half";
          return nullptr;
        }
        if (write && ref.rank != r) {
          *error = "writes rank " + std::to_string(ref.rank) + "'s scratch";
          return nullptr;
        }
        space = &scratch_[ref.rank][ref.half];
        break;
      case Space::Slot:
        if (ref.slot >= m.slots.size()) {
          *error = "names no slot";
          return nullptr;
        }
        space = &m.slots[ref.slot];
        break;
      case Space::Temp:
        space = &m.temp;
        break;
    }
    if (base + ref.offset + bytes > space->size()) {
      *error = "reaches past its buffer (" + std::to_string(base + ref.offset + bytes) + " > " +
               std::to_string(space->size()) + ")";
      return nullptr;
    }
    return space->data() + base + ref.offset;
  }

  // Happens-before checks of one access by stream a at its current clock.
  bool ordered(int a, int other, uint32_t at) const {
    return other < 0 || other == a || at == 0 || clocks_[a][other] >= at;
  }
  std::string read(int a, Cell& cell) {
    if (!ordered(a, cell.writer, cell.write_clock)) {
      return "reads a byte " + who(cell.writer) + " wrote without waiting for it";
    }
    cell.reads[a] = clocks_[a][a];
    return "";
  }
  std::string write(int a, Cell& cell, const Value& v) {
    if (!ordered(a, cell.writer, cell.write_clock)) {
      return "overwrites a byte " + who(cell.writer) + " wrote, unordered";
    }
    for (int q = 0; q < static_cast<int>(cell.reads.size()); ++q) {
      if (!ordered(a, q, cell.reads[q])) {
        return "overwrites a byte " + who(q) + " may still be reading";
      }
    }
    cell.value = v;
    cell.writer = a;
    cell.write_clock = clocks_[a][a];
    std::fill(cell.reads.begin(), cell.reads.end(), 0);
    return "";
  }

  static bool overlap(const Cell* a, uint64_t an, const Cell* b, uint64_t bn) {
    return a < b + bn && b < a + an;
  }

  void join(int a, const Clock& c) {
    for (size_t q = 0; q < c.size(); ++q) clocks_[a][q] = std::max(clocks_[a][q], c[q]);
  }

  std::string execute(int a, const Step& s) {
    const int r = actors_[a].rank;
    const Program& p = program(a, s);
    const Op& op = p.ops()[s.op];
    if (s.op == 0 && s.after != kNoCall) join(a, ends_[s.after][r]);  // the event's wait
    ++clocks_[a][a];
    const std::string at = where(a, s) + ": ";
    switch (op.kind) {
      case OpKind::Wait:
        for (const Flag& f : p.flags(op)) {
          const int16_t me = op.state == FlagState::Full ? f.consumer : f.producer;
          if (me != r) return at + "waits on a flag it is not the waiter of";
          join(a, flag(f).clock);
        }
        return "";
      case OpKind::Signal:
        for (const Flag& f : p.flags(op)) {
          FlagCell& cell = flag(f);
          if (op.state == FlagState::Full) {
            if (f.producer != r) return at + "sets Full a flag it does not produce";
            if (cell.state != FlagState::Empty) return at + "sets Full a flag that is Full";
          } else {
            if (f.consumer != r) return at + "sets Empty a flag it does not consume";
            if (cell.state != FlagState::Full) return at + "sets Empty a flag that is Empty";
          }
          cell.state = op.state;
          cell.clock = clocks_[a];
        }
        return "";
      case OpKind::Copy:
        for (const Piece& piece : p.pieces(op)) {
          std::string e;
          Cell* src = resolve(r, s.call, piece.src, piece.bytes, false, &e);
          Cell* dst = src ? resolve(r, s.call, piece.dst, piece.bytes, true, &e) : nullptr;
          if (!dst) return at + "copy " + e;
          if (overlap(src, piece.bytes, dst, piece.bytes)) return at + "copies onto itself";
          std::vector<Value> moved(piece.bytes);
          for (uint64_t i = 0; i < piece.bytes; ++i) {
            if (e = read(a, src[i]); !e.empty()) return at + "copy " + e;
            moved[i] = src[i].value;
          }
          for (uint64_t i = 0; i < piece.bytes; ++i) {
            if (e = write(a, dst[i], moved[i]); !e.empty()) return at + "copy " + e;
          }
        }
        return "";
      case OpKind::Reduce:
        return reduce(a, s, op, at);
      case OpKind::Scale:
      case OpKind::Divide:
        return elementwise(a, s, op, at);
    }
    return at + "unknown operation";
  }

  // Reads element i (elem bytes) at `cells`, checking its bytes belong together.
  std::string element(int a, Cell* cells, size_t elem, Value* out) {
    for (size_t k = 0; k < elem; ++k) {
      if (std::string e = read(a, cells[k]); !e.empty()) return e;
    }
    Value v = cells[0].value;
    for (size_t k = 0; k < elem; ++k) {
      Value b = cells[k].value;
      b.byte = 0;
      v.byte = 0;
      if (!(b == v) || cells[k].value.byte != static_cast<int>(k)) {
        return "reads an element whose bytes do not belong together";
      }
    }
    *out = v;
    return "";
  }
  std::string store(int a, Cell* cells, size_t elem, Value v) {
    for (size_t k = 0; k < elem; ++k) {
      v.byte = static_cast<int>(k);
      if (std::string e = write(a, cells[k], v); !e.empty()) return e;
    }
    return "";
  }

  std::string reduce(int a, const Step& s, const Op& op, const std::string& at) {
    const int r = actors_[a].rank;
    const Program& p = program(a, s);
    const size_t e = p.elem_size;
    const uint64_t bytes = op.elems * e;
    std::string error;
    Cell* dst = resolve(r, s.call, op.dst, bytes, true, &error);
    if (!dst) return at + "reduce " + error;
    std::vector<Cell*> sources;
    for (const Ref& ref : p.sources(op)) {
      Cell* c = resolve(r, s.call, ref, bytes, false, &error);
      if (!c) return at + "reduce " + error;
      if (!sources.empty() && overlap(c, bytes, dst, bytes)) {
        return at + "reduce writes over a source other than its first";
      }
      if (sources.empty() && c != dst && overlap(c, bytes, dst, bytes)) {
        return at + "reduce writes over its first source shifted";
      }
      sources.push_back(c);
    }
    for (uint64_t i = 0; i < op.elems; ++i) {
      Value sum;
      for (size_t k = 0; k < sources.size(); ++k) {
        Value v;
        if (error = element(a, sources[k] + i * e, e, &v); !error.empty()) {
          return at + "reduce " + error;
        }
        if (v.index < 0) return at + "reduce reads an element nothing wrote";
        if (v.divides != 0) return at + "reduce reads a divided element";
        if (k == 0) {
          sum = v;
          continue;
        }
        if (v.index != sum.index) return at + "reduce combines different elements";
        if ((v.ranks & sum.ranks) != 0) return at + "reduce counts a rank twice";
        sum.ranks |= v.ranks;
        sum.scaled |= v.scaled;
      }
      if (error = store(a, dst + i * e, e, sum); !error.empty()) return at + "reduce " + error;
    }
    return "";
  }

  std::string elementwise(int a, const Step& s, const Op& op, const std::string& at) {
    const int r = actors_[a].rank;
    const Program& p = program(a, s);
    const size_t e = p.elem_size;
    const uint64_t bytes = op.elems * e;
    std::string error;
    Cell* dst = resolve(r, s.call, op.dst, bytes, true, &error);
    Cell* src = op.kind == OpKind::Scale ? resolve(r, s.call, op.src, bytes, false, &error) : dst;
    if (!dst || !src) return at + error;
    if (src != dst && overlap(src, bytes, dst, bytes)) return at + "scales onto itself shifted";
    for (uint64_t i = 0; i < op.elems; ++i) {
      Value v;
      if (error = element(a, src + i * e, e, &v); !error.empty()) return at + error;
      if (v.index < 0) return at + "reads an element nothing wrote";
      if (op.kind == OpKind::Scale) {
        if (v.ranks != (uint64_t{1} << r) || v.scaled != 0) {
          return at + "scales what is not this rank's own input";
        }
        v.scaled = v.ranks;
      } else {
        ++v.divides;
      }
      if (error = store(a, dst + i * e, e, v); !error.empty()) return at + error;
    }
    return "";
  }

  const int n_;
  const uint64_t half_;
  std::vector<Call>& calls_;
  std::vector<Actor> actors_;             // the streams
  std::vector<Clock> clocks_;             // per stream
  std::vector<std::vector<Clock>> ends_;  // [call][rank]: the clock at the program's end
  std::vector<FlagCell> flags_;
  std::vector<std::array<std::vector<Cell>, kHalves>> scratch_;
  std::vector<std::vector<Memory>> memory_;  // [call][rank]
};

}  // namespace

std::string run(int nranks, uint64_t half_bytes, std::vector<Call>& calls, const Options& options) {
  for (const Call& c : calls) {
    if (static_cast<int>(c.programs.size()) != nranks ||
        static_cast<int>(c.buffers.size()) != nranks) {
      return "a call needs one program and one set of buffers per rank";
    }
    if (!c.streams.empty() && static_cast<int>(c.streams.size()) != nranks) {
      return "a call needs no streams or one per rank";
    }
  }
  Machine machine(nranks, half_bytes, calls, options.order_across_streams);
  return machine.run(options.seed);
}

}  // namespace ccl::algo::device::model
