// A collective on device buffers as data, and the device waits on the device (docs/cuda.md, "Device
// collectives among the ranks of one host"): one rank's Program is an ordered list of operations
// that its CUDA stream runs, and nothing in it ever asks the host to wait. The executor
// (core/device/device_executor.h) turns each operation into driver calls queued on the stream;
// tests/unit/algorithms runs the programs of every rank against a model of the flags and memory and
// proves they end with the exact result, without a race and without a deadlock.
//
// The ranks of one host reach each other in two ways:
//   scratch  every rank owns a device buffer of two halves, which the others can read (CUDA IPC,
//            or peer access inside one process) but never write. A rank copies what its peers
//            need into its own scratch; the peers read it from there.
//   flags    32-bit words in host memory that every rank maps (core/device/device_world.h), one
//            per (line, half, producer, consumer). A flag is a handshake between exactly one
//            producer and one consumer: the producer sets it Full once its scratch half holds
//            what the consumer needs, the consumer sets it Empty once it has read it. The stream
//            waits for a state with cuStreamWaitValue32, and sets one with cuStreamWriteValue32
//            (which fences the producer's earlier writes first).
// The states are constants, not sequence numbers, so a program captured in a CUDA graph and
// replayed any number of times behaves as if it were queued again: a flag is back to Empty at
// the end of every call. Two halves let a rank fill one while its peers still read the other.
//
// The rules every builder keeps (and the verifier checks):
//   * before a rank writes into its scratch half h, it waits until every flag it produces for
//     h (both lines, every consumer) is Empty: nobody reads that half any more. This is also
//     what makes a Signal Full legal (a flag is set Full only while it is Empty);
//   * only the consumer of a flag sets it Empty, after its last read of the half;
//   * a rank reads a peer's scratch only between a Wait Full and the Signal Empty of a flag the
//     peer produces for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ccl::algo::device {

// Where the bytes of an operation are.
enum class Space : uint8_t {
  Input,    // the caller's sendbuff
  Output,   // the caller's recvbuff
  Scratch,  // scratch half `half` of rank `rank`
  Slot,     // buffer `slot` of a group of sends and receives (one per operation)
  Temp,     // a device buffer of this rank's own, Program::temp_bytes long (in-place alltoallv)
};

struct Ref {
  Space space = Space::Input;
  uint8_t half = 0;     // Scratch
  int16_t rank = -1;    // Scratch: whose
  uint32_t slot = 0;    // Slot
  uint64_t offset = 0;  // bytes from the start of the space (or of the half)

  bool operator==(const Ref&) const = default;
};

enum class Line : uint8_t {
  Data,    // "my scratch half holds my input (or my piece for you)"
  Result,  // "my scratch half holds my reduced slice" (two-shot allreduce's second phase)
};
inline constexpr int kLines = 2;
inline constexpr int kHalves = 2;

enum class FlagState : uint8_t { Empty, Full };

struct Flag {
  Line line = Line::Data;
  uint8_t half = 0;
  int16_t producer = 0;
  int16_t consumer = 0;

  bool operator==(const Flag&) const = default;
};

// The index of `flag` in a page of nranks ranks: (line, half, producer, consumer), row-major.
constexpr size_t flag_index(const Flag& flag, int nranks) {
  return ((static_cast<size_t>(flag.line) * kHalves + flag.half) * nranks + flag.producer) *
             nranks +
         flag.consumer;
}
constexpr size_t flags_per_page(int nranks) {
  return static_cast<size_t>(kLines) * kHalves * nranks * nranks;
}

enum class OpKind : uint8_t {
  Wait,    // every flag of the op reaches `state`
  Signal,  // every flag of the op is set to `state`
  Copy,    // every piece: dst <- src, `bytes` each
  Reduce,  // dst <- sources[0] op sources[1] op ... (left to right), `elems` elements; dst may be
           // sources[0] itself, no other source
  Scale,   // dst <- src * the PreMulSum scalar, `elems` elements (the rank's own contribution)
  Divide,  // dst <- dst / nranks, `elems` elements (avg)
};

struct Piece {
  Ref dst;
  Ref src;
  uint64_t bytes = 0;
};

// One operation; its flags, pieces or sources are a range of the program's side vectors.
struct Op {
  OpKind kind = OpKind::Copy;
  FlagState state = FlagState::Empty;  // Wait, Signal
  uint32_t first = 0;                  // into flags, pieces or sources
  uint32_t count = 0;
  uint64_t elems = 0;  // Reduce, Scale, Divide
  Ref dst;             // Reduce, Scale, Divide
  Ref src;             // Scale
};

class Program {
 public:
  size_t elem_size = 1;
  uint64_t temp_bytes = 0;  // Space::Temp's size (0: none)

  std::span<const Op> ops() const { return ops_; }
  std::span<const Flag> flags(const Op& op) const { return {flags_.data() + op.first, op.count}; }
  std::span<const Piece> pieces(const Op& op) const {
    return {pieces_.data() + op.first, op.count};
  }
  std::span<const Ref> sources(const Op& op) const {
    return {sources_.data() + op.first, op.count};
  }

  // Building (an empty list adds nothing).
  void wait(std::span<const Flag> flags, FlagState state);
  void signal(std::span<const Flag> flags, FlagState state);
  void copy(std::span<const Piece> pieces);
  void copy(const Ref& dst, const Ref& src, uint64_t bytes);
  void reduce(const Ref& dst, std::span<const Ref> sources, uint64_t elems);
  void scale(const Ref& dst, const Ref& src, uint64_t elems);
  void divide(const Ref& dst, uint64_t elems);

 private:
  std::vector<Op> ops_;
  std::vector<Flag> flags_;
  std::vector<Piece> pieces_;
  std::vector<Ref> sources_;
};

// What the executor (core/device/device_executor.cc) queues for a program: batches of stream
// memory operations (a run of Wait and Signal ops, at most 256 flags a batch), copies
// (cuMemcpyAsync, one a piece) and kernel launches (an n-way reduction is n - 1). The host cost
// of a call is about their sum times the cost of one driver call, plus the program's building.
struct DriverCalls {
  size_t batches = 0;
  size_t copies = 0;
  size_t launches = 0;
  size_t total() const { return batches + copies + launches; }
};
DriverCalls driver_calls(const Program& program);

// Short helpers for builders.
inline Ref input(uint64_t offset = 0) { return {Space::Input, 0, -1, 0, offset}; }
inline Ref output(uint64_t offset = 0) { return {Space::Output, 0, -1, 0, offset}; }
inline Ref scratch(int rank, unsigned half, uint64_t offset = 0) {
  return {Space::Scratch, static_cast<uint8_t>(half), static_cast<int16_t>(rank), 0, offset};
}
inline Ref slot(uint32_t index, uint64_t offset = 0) { return {Space::Slot, 0, -1, index, offset}; }
inline Ref temp(uint64_t offset = 0) { return {Space::Temp, 0, -1, 0, offset}; }

}  // namespace ccl::algo::device
