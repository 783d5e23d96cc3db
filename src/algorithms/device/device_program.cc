#include "algorithms/device/device_program.h"

namespace ccl::algo::device {
namespace {
Op make(OpKind kind, FlagState state, size_t first, size_t count) {
  Op op;
  op.kind = kind;
  op.state = state;
  op.first = static_cast<uint32_t>(first);
  op.count = static_cast<uint32_t>(count);
  return op;
}
}  // namespace

void Program::wait(std::span<const Flag> flags, FlagState state) {
  if (flags.empty()) return;
  ops_.push_back(make(OpKind::Wait, state, flags_.size(), flags.size()));
  flags_.insert(flags_.end(), flags.begin(), flags.end());
}

void Program::signal(std::span<const Flag> flags, FlagState state) {
  if (flags.empty()) return;
  ops_.push_back(make(OpKind::Signal, state, flags_.size(), flags.size()));
  flags_.insert(flags_.end(), flags.begin(), flags.end());
}

void Program::copy(std::span<const Piece> pieces) {
  Op op = make(OpKind::Copy, FlagState::Empty, pieces_.size(), 0);
  for (const Piece& p : pieces) {
    if (p.bytes == 0) continue;
    pieces_.push_back(p);
    ++op.count;
  }
  if (op.count > 0) ops_.push_back(op);
}

void Program::copy(const Ref& dst, const Ref& src, uint64_t bytes) {
  const Piece piece{dst, src, bytes};
  copy(std::span<const Piece>(&piece, 1));
}

void Program::reduce(const Ref& dst, std::span<const Ref> sources, uint64_t elems) {
  if (elems == 0 || sources.empty()) return;
  Op op = make(OpKind::Reduce, FlagState::Empty, sources_.size(), sources.size());
  op.elems = elems;
  op.dst = dst;
  sources_.insert(sources_.end(), sources.begin(), sources.end());
  ops_.push_back(op);
}

void Program::scale(const Ref& dst, const Ref& src, uint64_t elems) {
  if (elems == 0) return;
  Op op = make(OpKind::Scale, FlagState::Empty, 0, 0);
  op.elems = elems;
  op.dst = dst;
  op.src = src;
  ops_.push_back(op);
}

void Program::divide(const Ref& dst, uint64_t elems) {
  if (elems == 0) return;
  Op op = make(OpKind::Divide, FlagState::Empty, 0, 0);
  op.elems = elems;
  op.dst = dst;
  ops_.push_back(op);
}

DriverCalls driver_calls(const Program& program) {
  DriverCalls calls;
  size_t flags = 0;  // in the batch being collected
  auto flush = [&] {
    calls.batches += (flags + 255) / 256;
    flags = 0;
  };
  for (const Op& op : program.ops()) {
    switch (op.kind) {
      case OpKind::Wait:
      case OpKind::Signal:
        flags += op.count;
        continue;
      case OpKind::Copy:
        calls.copies += op.count;
        break;
      case OpKind::Reduce:
        calls.launches += op.count > 1 ? op.count - 1 : 0;
        calls.copies += op.count == 1 ? 1 : 0;
        break;
      case OpKind::Scale:
      case OpKind::Divide:
        ++calls.launches;
        break;
    }
    flush();
  }
  flush();
  return calls;
}

}  // namespace ccl::algo::device
