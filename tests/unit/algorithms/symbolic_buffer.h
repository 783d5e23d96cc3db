// Symbolic memory for the schedule verifier: instead of numbers, every element holds a formula
// over the ranks' original Input buffers, so the verifier can prove which contributions reached
// which element, and how many times.
//
// An element at position x holds  sum over terms t of  count_t * Input_{rank_t}[x + delta_t]
// (before a possible Finalize). Deltas are relative to the element's own position, so a run of
// elements that came from one contiguous source has one Value, and a buffer of a million elements
// is a handful of runs: the verifier stays cheap at any count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ccl::algo::verify {

struct Term {
  int rank = 0;
  int64_t delta = 0;
  uint32_t count = 1;  // > 1 means double counting
  bool operator==(const Term&) const = default;
};

struct Value {
  bool defined = false;     // false: whatever was in the buffer before the call (garbage)
  bool finalized = false;   // the op's final step (avg's divide) has been applied
  std::vector<Term> terms;  // sorted by (rank, delta), counts > 0
  bool operator==(const Value&) const = default;

  static Value undefined() { return Value{}; }
  // Input_rank[x + delta] at position x.
  static Value input_of(int rank, int64_t delta);
  // sum over all ranks of Input_r[x + delta], each once.
  static Value reduced(int nranks, int64_t delta, bool finalized);
  // This value as seen from a position `shift` elements earlier (deltas grow by `shift`).
  Value shifted(int64_t shift) const;
  std::string describe() const;
};

// dst = a (op) b, for values at the same position. Throws VerifyError on garbage or on data that
// has already been finalized (reducing into an average is a bug).
Value combine(const Value& a, const Value& b);

// A run of `len` elements with one Value, deltas relative to the run's own first element
// position in whatever it describes (a message, a read result).
struct Run {
  size_t len = 0;
  Value value;
};
using Runs = std::vector<Run>;

// Lines up two run lists of the same total length and reduces them element-wise.
Runs combine_runs(const Runs& a, const Runs& b);

// The first error stops the verification; this carries its text up to verify().
struct VerifyError {
  std::string what;
};

// A buffer of `size` elements as an interval map of Values.
class SymbolicBuffer {
 public:
  explicit SymbolicBuffer(size_t size = 0);
  size_t size() const { return size_; }
  // Elements [off, off+len) as runs; deltas relative to `off` (element k is Input_r[k + delta]).
  Runs read(size_t off, size_t len) const;
  // Writes runs (relative to `off`) at [off, off + total length).
  void write(size_t off, const Runs& runs);
  // Applies `f` to every Value in [off, off+len).
  template <typename F>
  void transform(size_t off, size_t len, F f) {
    Runs runs = read(off, len);
    for (Run& r : runs) r.value = f(r.value);
    write(off, runs);
  }
  size_t segment_count() const { return segs_.size(); }

 private:
  struct Seg {
    size_t end;
    Value value;  // deltas relative to the element's own position
  };
  void split_at(size_t pos);
  void coalesce(size_t from, size_t to);
  size_t size_;
  std::map<size_t, Seg> segs_;  // start -> segment; together they cover [0, size_)
};

}  // namespace ccl::algo::verify
