// A model of the ranks of one host running their device programs (algorithms/device/
// device_program.h) on their CUDA streams: the flags as handshakes, the scratch halves, and what
// every element of every buffer holds, symbolically. The model proves a set of programs right
// for every interleaving of the streams, not only the one it happens to run:
//   * races: happens-before by vector clocks, one per stream. A stream's operations are ordered;
//     a Signal carries its stream's clock to the Wait that sees it. Every read must come after
//     the write it reads, every write after the reads and the write before it, whatever the
//     interleaving (as ThreadSanitizer reasons);
//   * handshakes: a flag is set Full only by its producer while Empty, Empty only by its
//     consumer while Full; a rank reads a peer's scratch only while it holds a Full flag of
//     that peer's for that half, and writes only its own scratch;
//   * deadlock: the flags are single-producer single-consumer handshakes, so whether the
//     programs finish does not depend on the interleaving; if no stream can move while some have
//     operations left, it is a deadlock;
//   * values: an element holds (index, the ranks whose contribution it sums, which of those were
//     scaled, how often it was divided); a reduction must combine equal indices and disjoint
//     rank sets; the outputs must hold exactly what the test expects;
//   * at the end every flag is Empty again (the next call, or a graph replay, starts clean).
// Several calls in a row (run() of a list of programs per rank) share the flags and scratch, as
// the calls of one communicator do.
//
// A rank may queue its calls on several streams (Call::streams). Each stream runs its calls in
// call order with a clock of its own, and all share the rank's scratch and flags, so the library
// orders them (DeviceWorld::enqueue): a program queued on another stream than the rank's
// previous program waits for that program's end (an event) and happens-after it. A rank's
// programs then run one at a time, and every flag keeps one waiter. Without that wait
// (Options::order_across_streams false) a rank's streams meet only through flags, and two of its
// programs can run at once on the same scratch and flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/device/device_program.h"

namespace ccl::algo::device::model {

struct Value {
  int64_t index = -1;   // -1: nothing written yet
  uint64_t ranks = 0;   // contributions summed
  uint64_t scaled = 0;  // contributions multiplied by their PreMulSum scalar
  int divides = 0;
  int byte = 0;  // which byte of its element this is (a copy that cuts elements shows)
  bool operator==(const Value&) const = default;
};
std::string describe(const Value& v);

// `count` elements of `elem_size` bytes, element i holding value(i) (its `byte` set per byte).
template <class F>
std::vector<Value> elements(size_t count, size_t elem_size, F value) {
  std::vector<Value> bytes(count * elem_size);
  for (size_t i = 0; i < count; ++i) {
    for (size_t k = 0; k < elem_size; ++k) {
      bytes[i * elem_size + k] = value(i);
      bytes[i * elem_size + k].byte = static_cast<int>(k);
    }
  }
  return bytes;
}

// One rank's buffers for one call, a Value per byte (Slot: one buffer per operation). Input and
// Output may be windows of one memory (in place): then `input` is that memory, Input starts
// `input_offset` bytes into it, Output `output_offset` bytes, and `output` is unused.
struct Buffers {
  std::vector<Value> input;
  std::vector<Value> output;
  bool in_place = false;
  size_t input_offset = 0;
  size_t output_offset = 0;
  std::vector<std::vector<Value>> slots;
};

struct Call {
  std::vector<Program> programs;  // one per rank
  std::vector<Buffers> buffers;   // one per rank, updated by run()
  std::vector<int> streams;       // the stream each rank queues it on; empty: every rank's 0
};

struct Options {
  unsigned seed = 1;  // picks the interleaving the run happens to follow
  // DeviceWorld::enqueue's rule: a rank's program on another stream than its previous program
  // waits for that program's end. false: a rank's streams run independently.
  bool order_across_streams = true;
};

// Runs the calls one after another on the ranks' streams (rank r queues call 0's program, then
// call 1's, ... with no host synchronization in between), starting from Empty flags, scratch of
// `half_bytes` per half. "" if every check passed, else the first problem, naming the rank (and
// the stream, where ranks have several), the call and the operation.
std::string run(int nranks, uint64_t half_bytes, std::vector<Call>& calls, const Options& options);
inline std::string run(int nranks, uint64_t half_bytes, std::vector<Call>& calls,
                       unsigned seed = 1) {
  return run(nranks, half_bytes, calls, Options{.seed = seed});
}

// The `bytes` bytes of a rank's Output after run() (in place: the window inside Input).
std::vector<Value> output_of(const Buffers& b, size_t bytes);

// "" if `got` holds `want` (a Value per element, bytes numbered as elements() numbers them),
// else the first element that differs.
std::string compare(const std::vector<Value>& got, const std::vector<Value>& want);

}  // namespace ccl::algo::device::model
