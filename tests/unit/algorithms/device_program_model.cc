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

using Clock = std::vector<uint32_t>;

// One byte of memory with what happens-before needs to know about its accesses.
struct Cell {
  Value value;
  int writer = -1;  // -1: written by the host before every call
  uint32_t write_clock = 0;
  std::vector<uint32_t> reads;  // per rank, the clock of its latest read since the write (0: none)
};

struct FlagCell {
  FlagState state = FlagState::Empty;
  Clock clock;
};

class Machine {
 public:
  Machine(int nranks, uint64_t half, std::vector<Call>& calls)
      : n_(nranks),
        half_(half),
        calls_(calls),
        clocks_(nranks, Clock(nranks, 0)),
        next_(nranks, {0, 0}),
        flags_(flags_per_page(nranks)) {
    for (int r = 0; r < n_; ++r) {
      while (next_[r].call < calls_.size() && calls_[next_[r].call].programs[r].ops().empty()) {
        ++next_[r].call;
      }
    }
    for (FlagCell& f : flags_) f.clock.assign(n_, 0);
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
    std::vector<int> order(n_);
    for (int r = 0; r < n_; ++r) order[r] = r;
    for (;;) {
      bool moved = false, left = false;
      std::shuffle(order.begin(), order.end(), random);
      for (int r : order) {
        // A few operations of this stream at a time, so that streams interleave.
        for (int burst = 1 + static_cast<int>(random() % 3); burst > 0; --burst) {
          if (done(r)) break;
          left = true;
          const Step step = step_of(r);
          if (!ready(r, step)) break;
          if (std::string e = execute(r, step); !e.empty()) return e;
          moved = true;
          advance(r);
        }
        left = left || !done(r);
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
  };

  std::vector<Cell> cells(const std::vector<Value>& values) const {
    std::vector<Cell> c(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      c[i].value = values[i];
      c[i].reads.assign(n_, 0);
    }
    return c;
  }
  static std::vector<Value> values(const std::vector<Cell>& cells) {
    std::vector<Value> v(cells.size());
    for (size_t i = 0; i < cells.size(); ++i) v[i] = cells[i].value;
    return v;
  }

  bool done(int r) const { return next_[r].call >= calls_.size(); }
  Step step_of(int r) const { return next_[r]; }
  void advance(int r) {
    Step& s = next_[r];
    if (++s.op >= calls_[s.call].programs[r].ops().size()) {
      s.op = 0;
      ++s.call;
      while (s.call < calls_.size() && calls_[s.call].programs[r].ops().empty()) ++s.call;
    }
  }
  const Program& program(int r, const Step& s) const { return calls_[s.call].programs[r]; }

  std::string where(int r, const Step& s) const {
    std::ostringstream o;
    o << "rank " << r << ", call " << s.call << ", op " << s.op;
    return o.str();
  }

  FlagCell& flag(const Flag& f) { return flags_[flag_index(f, n_)]; }

  bool ready(int r, const Step& s) {
    const Program& p = program(r, s);
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
    for (int r = 0; r < n_; ++r) {
      if (done(r)) {
        o << " rank " << r << " done;";
      } else {
        o << " " << where(r, next_[r]) << " waits;";
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

  // Happens-before checks of one access by rank r at its current clock.
  bool ordered(int r, int other, uint32_t at) const {
    return other < 0 || other == r || at == 0 || clocks_[r][other] >= at;
  }
  std::string read(int r, Cell& cell) {
    if (!ordered(r, cell.writer, cell.write_clock)) {
      return "reads a byte rank " + std::to_string(cell.writer) + " wrote without waiting for it";
    }
    cell.reads[r] = clocks_[r][r];
    return "";
  }
  std::string write(int r, Cell& cell, const Value& v) {
    if (!ordered(r, cell.writer, cell.write_clock)) {
      return "overwrites a byte rank " + std::to_string(cell.writer) + " wrote, unordered";
    }
    for (int q = 0; q < n_; ++q) {
      if (!ordered(r, q, cell.reads[q])) {
        return "overwrites a byte rank " + std::to_string(q) + " may still be reading";
      }
    }
    cell.value = v;
    cell.writer = r;
    cell.write_clock = clocks_[r][r];
    std::fill(cell.reads.begin(), cell.reads.end(), 0);
    return "";
  }

  static bool overlap(const Cell* a, uint64_t an, const Cell* b, uint64_t bn) {
    return a < b + bn && b < a + an;
  }

  std::string execute(int r, const Step& s) {
    const Program& p = program(r, s);
    const Op& op = p.ops()[s.op];
    ++clocks_[r][r];
    const std::string at = where(r, s) + ": ";
    switch (op.kind) {
      case OpKind::Wait:
        for (const Flag& f : p.flags(op)) {
          const int16_t me = op.state == FlagState::Full ? f.consumer : f.producer;
          if (me != r) return at + "waits on a flag it is not the waiter of";
          const Clock& c = flag(f).clock;
          for (int q = 0; q < n_; ++q) clocks_[r][q] = std::max(clocks_[r][q], c[q]);
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
          cell.clock = clocks_[r];
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
            if (e = read(r, src[i]); !e.empty()) return at + "copy " + e;
            moved[i] = src[i].value;
          }
          for (uint64_t i = 0; i < piece.bytes; ++i) {
            if (e = write(r, dst[i], moved[i]); !e.empty()) return at + "copy " + e;
          }
        }
        return "";
      case OpKind::Reduce:
        return reduce(r, s, op, at);
      case OpKind::Scale:
      case OpKind::Divide:
        return elementwise(r, s, op, at);
    }
    return at + "unknown operation";
  }

  // Reads element i (elem bytes) at `cells`, checking its bytes belong together.
  std::string element(int r, Cell* cells, size_t elem, Value* out) {
    for (size_t k = 0; k < elem; ++k) {
      if (std::string e = read(r, cells[k]); !e.empty()) return e;
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
  std::string store(int r, Cell* cells, size_t elem, Value v) {
    for (size_t k = 0; k < elem; ++k) {
      v.byte = static_cast<int>(k);
      if (std::string e = write(r, cells[k], v); !e.empty()) return e;
    }
    return "";
  }

  std::string reduce(int r, const Step& s, const Op& op, const std::string& at) {
    const Program& p = program(r, s);
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
        if (error = element(r, sources[k] + i * e, e, &v); !error.empty()) {
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
      if (error = store(r, dst + i * e, e, sum); !error.empty()) return at + "reduce " + error;
    }
    return "";
  }

  std::string elementwise(int r, const Step& s, const Op& op, const std::string& at) {
    const Program& p = program(r, s);
    const size_t e = p.elem_size;
    const uint64_t bytes = op.elems * e;
    std::string error;
    Cell* dst = resolve(r, s.call, op.dst, bytes, true, &error);
    Cell* src = op.kind == OpKind::Scale ? resolve(r, s.call, op.src, bytes, false, &error) : dst;
    if (!dst || !src) return at + error;
    if (src != dst && overlap(src, bytes, dst, bytes)) return at + "scales onto itself shifted";
    for (uint64_t i = 0; i < op.elems; ++i) {
      Value v;
      if (error = element(r, src + i * e, e, &v); !error.empty()) return at + error;
      if (v.index < 0) return at + "reads an element nothing wrote";
      if (op.kind == OpKind::Scale) {
        if (v.ranks != (uint64_t{1} << r) || v.scaled != 0) {
          return at + "scales what is not this rank's own input";
        }
        v.scaled = v.ranks;
      } else {
        ++v.divides;
      }
      if (error = store(r, dst + i * e, e, v); !error.empty()) return at + error;
    }
    return "";
  }

  const int n_;
  const uint64_t half_;
  std::vector<Call>& calls_;
  std::vector<Clock> clocks_;
  std::vector<Step> next_;
  std::vector<FlagCell> flags_;
  std::vector<std::array<std::vector<Cell>, kHalves>> scratch_;
  std::vector<std::vector<Memory>> memory_;  // [call][rank]
};

}  // namespace

std::string run(int nranks, uint64_t half_bytes, std::vector<Call>& calls, unsigned seed) {
  for (const Call& c : calls) {
    if (static_cast<int>(c.programs.size()) != nranks ||
        static_cast<int>(c.buffers.size()) != nranks) {
      return "a call needs one program and one set of buffers per rank";
    }
  }
  Machine machine(nranks, half_bytes, calls);
  return machine.run(seed);
}

}  // namespace ccl::algo::device::model
