// DeviceWorld::queue_program: one device program as driver calls on a stream. Waits and signals
// become stream memory operations on the flag page, collected so that consecutive ones (a
// signal to every peer, then a wait for every peer) are one cuStreamBatchMemOp; copies are
// cuMemcpyAsync (the copy engines, between GPUs over P2P); reductions, PreMulSum's scaling and
// avg's division are ccl's kernels (cuda_kernels.h), an n-way reduction as n - 1 launches.
// Nothing here waits: every call only queues.
#include "base/error.h"
#include "core/device/device_world.h"

namespace ccl {

namespace dev = algo::device;
using algo::device::Space;

std::byte* DeviceWorld::resolve(const algo::device::Ref& ref,
                                const DeviceBindings& bindings) const {
  switch (ref.space) {
    case Space::Input:
      return static_cast<std::byte*>(const_cast<void*>(bindings.input)) + ref.offset;
    case Space::Output:
      return static_cast<std::byte*>(bindings.output) + ref.offset;
    case Space::Scratch:
      return peers_[ref.rank] + ref.half * half_bytes_ + ref.offset;
    case Space::Slot:
      return bindings.slots[ref.slot] + ref.offset;
    case Space::Temp:
      return static_cast<std::byte*>(temps_.back().data()) + ref.offset;
  }
  throw Error(cclInternalError, "a device program names an unknown space");
}

void DeviceWorld::queue_program(const algo::device::Program& program,
                                const DeviceBindings& bindings, void* stream, uint32_t done) {
  if (program.temp_bytes > 0) temp(program.temp_bytes);
  const size_t elem = program.elem_size;
  cuda::MemOps flags;
  for (const algo::device::Op& op : program.ops()) {
    if (op.kind == dev::OpKind::Wait || op.kind == dev::OpKind::Signal) {
      for (const algo::device::Flag& f : program.flags(op)) {
        if (flags.full()) flags.flush(stream);
        const uint64_t address = page_->flag_address(f);
        if (op.kind == dev::OpKind::Wait) {
          flags.wait(address, FlagPage::wait_mask(op.state));
        } else {
          flags.write(address, FlagPage::value(op.state));
        }
      }
      continue;
    }
    flags.flush(stream);
    switch (op.kind) {
      case dev::OpKind::Copy:
        for (const algo::device::Piece& piece : program.pieces(op)) {
          cuda::copy_on(stream, resolve(piece.dst, bindings), resolve(piece.src, bindings),
                        piece.bytes);
        }
        break;
      case dev::OpKind::Reduce: {
        const std::span<const algo::device::Ref> sources = program.sources(op);
        std::byte* dst = resolve(op.dst, bindings);
        const std::byte* first = resolve(sources[0], bindings);
        if (sources.size() == 1) {
          if (dst != first) cuda::copy_on(stream, dst, first, op.elems * elem);
          break;
        }
        for (size_t k = 1; k < sources.size(); ++k) {
          kernels_.reduce(context_, stream, dst, k == 1 ? first : dst,
                          resolve(sources[k], bindings), op.elems, bindings.type, bindings.op);
        }
        break;
      }
      case dev::OpKind::Scale:
        kernels_.scale(context_, stream, resolve(op.dst, bindings), resolve(op.src, bindings),
                       op.elems, bindings.type, bindings.scalar_bits);
        break;
      case dev::OpKind::Divide:
        kernels_.divide(context_, stream, resolve(op.dst, bindings), op.elems, bindings.type,
                        static_cast<uint64_t>(nranks_));
        break;
      default:
        break;
    }
  }
  if (done != 0) {
    if (flags.full()) flags.flush(stream);
    flags.write(page_->done_address(rank_), done);
  }
  flags.flush(stream);
}

}  // namespace ccl
