// The collectives of a communicator: each asks the planner for its algorithm (the direct,
// shared-window path when every rank shares memory and the message fits the window, else a
// schedule, cached per shape) and runs it through the op runner, under op_mutex_.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <string_view>

#include "algorithms/alltoall.h"
#include "algorithms/chain_reduce.h"
#include "algorithms/hierarchical.h"
#include "algorithms/rabenseifner.h"
#include "algorithms/recursive_doubling.h"
#include "algorithms/reduce/reduce.h"
#include "algorithms/ring.h"
#include "algorithms/tree_rooted.h"
#include "base/error.h"
#include "base/log.h"
#include "core/comm/comm.h"
#include "core/device/device_plan.h"
#include "core/tuning/registry.h"

namespace ccl {

namespace {

// The bytes [0, extent) of a v-collective's buffer that `counts` and `displs` address.
size_t extent_bytes(std::span<const size_t> counts, std::span<const size_t> displs,
                    size_t elem_size) {
  size_t extent = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    if (counts[q] != 0) extent = std::max(extent, displs[q] + counts[q]);
  }
  return extent * elem_size;
}

size_t sum(std::span<const size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

}  // namespace

// A call, from the C layer or a queue: the device path when the communicator runs it there, else
// the host path, whose buffers go through the staging first (what each rank reads and writes;
// device buffers go through pinned host memory, device_staging.h).

void Communicator::run(const Call& call) {
  using Kind = OpKind;
  switch (call.kind) {
    case Kind::AllReduce:
      return all_reduce(call);
    case Kind::Broadcast:
      return broadcast(call);
    case Kind::Reduce:
      return reduce(call);
    case Kind::AllGather:
      return all_gather(call);
    case Kind::AllGatherV:
      return all_gather_v(call);
    case Kind::ReduceScatter:
      return reduce_scatter(call);
    case Kind::AlltoAll:
      return all_to_all(call);
    case Kind::AlltoAllV:
      return all_to_all_v(call);
    case Kind::SendRecv:
      return point_to_point(call);
    case Kind::Barrier:
      return barrier(call);
  }
  throw_error(cclInternalError, "%s: unknown operation kind %u", call.function,
              static_cast<unsigned>(call.kind));
}

cclResult_t Communicator::run_calls(std::span<const Call> calls) noexcept {
  for (const Call& call : calls) {
    try {
      run(call);
    } catch (...) {
      return record_exception(call.function);  // the communicator is unusable after a failure
    }
  }
  return cclSuccess;
}

cclResult_t Communicator::run_queued(std::span<const Call> calls) noexcept {
  const cclResult_t result = run_calls(calls);
  queued_end();
  return result;
}

bool Communicator::device_collective(const Call& call, std::optional<void*> cuda_stream) {
  // The device world is the init's (its own thread's, for a non-blocking init): wait for it.
  runner_.check_usable(call.function);
  if (!device_ || !device_->takes(call)) return false;
  DevicePlan plan = plan_device(call, *device_, reduction_ops_, planner_.tuner().selection());
  if (cuda_stream) {
    device_->enqueue(plan.program, plan.bindings, *cuda_stream);
  } else {
    device_->run(plan.program, plan.bindings);
  }
  return true;
}

template <class Run>
void Communicator::stage_elementwise(const char* name, const Call& call, CallBuffer input,
                                     CallBuffer output, Run&& run) {
  const size_t elem = reduce::datatype_size(call.type);
  if (staging_chunks_ && call.count * elem > staging_chunk_) {
    staging_.stage_chunks(name, input, output, elem, call.count, staging_chunk_,
                          [&](const void* in, void* out, size_t, size_t n) { run(in, out, n); });
    return;
  }
  staging_.stage(name, input, output, [&](const void* in, void* out) { run(in, out, call.count); });
}

void Communicator::all_reduce(const Call& call) {
  if (call.count > 0 && device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = call.count * reduce::datatype_size(call.type);
  stage_elementwise(
      "allreduce", call, {call.sendbuff, bytes}, {call.recvbuff, bytes},
      [&](const void* in, void* out, size_t n) { reduce_to(in, out, n, call.type, call.op, -1); });
}

void Communicator::reduce(const Call& call) {
  if (call.count > 0 && device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = call.count * reduce::datatype_size(call.type);
  stage_elementwise("reduce", call, {call.sendbuff, bytes},
                    {call.recvbuff, rank() == call.root ? bytes : 0},
                    [&](const void* in, void* out, size_t n) {
                      reduce_to(in, out, n, call.type, call.op, call.root);
                    });
}

void Communicator::broadcast(const Call& call) {
  if (call.count > 0 && device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = call.count * reduce::datatype_size(call.type);
  stage_elementwise("broadcast", call, {call.sendbuff, rank() == call.root ? bytes : 0},
                    {call.recvbuff, bytes}, [&](const void* in, void* out, size_t n) {
                      broadcast_host(in, out, n, call.type, call.root);
                    });
}

void Communicator::all_gather(const Call& call) {
  if (call.count > 0 && device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = call.count * reduce::datatype_size(call.type);
  staging_.stage(
      "allgather", {call.sendbuff, bytes}, {call.recvbuff, bytes * nranks()},
      [&](const void* in, void* out) { all_gather_host(in, out, call.count, call.type); });
}

void Communicator::all_gather_v(const Call& call) {
  if (device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t elem = reduce::datatype_size(call.type);
  staging_.stage("allgatherv", {call.sendbuff, call.counts()[rank()] * elem},
                 {call.recvbuff, extent_bytes(call.counts(), call.displs(), elem)},
                 [&](const void* in, void* out) {
                   all_gather_v_host(in, out, call.counts(), call.displs(), call.type);
                 });
}

void Communicator::reduce_scatter(const Call& call) {
  if (call.count > 0 && device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = call.count * reduce::datatype_size(call.type);
  staging_.stage("reducescatter", {call.sendbuff, bytes * nranks()}, {call.recvbuff, bytes},
                 [&](const void* in, void* out) {
                   reduce_scatter_host(in, out, call.count, call.type, call.op);
                 });
}

void Communicator::all_to_all(const Call& call) {
  if (call.count > 0 && device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = call.count * reduce::datatype_size(call.type) * nranks();
  staging_.stage(
      "alltoall", {call.sendbuff, bytes}, {call.recvbuff, bytes},
      [&](const void* in, void* out) { all_to_all_host(in, out, call.count, call.type); });
}

void Communicator::all_to_all_v(const Call& call) {
  if (device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t elem = reduce::datatype_size(call.type);
  staging_.stage("alltoallv", {call.sendbuff, extent_bytes(call.counts(), call.displs(), elem)},
                 {call.recvbuff, extent_bytes(call.recvcounts(), call.rdispls(), elem)},
                 [&](const void* in, void* out) {
                   all_to_all_v_host(in, call.counts(), call.displs(), out, call.recvcounts(),
                                     call.rdispls(), call.type);
                 });
}

void Communicator::point_to_point(const Call& call) {
  if (device_collective(call, std::nullopt)) return;
  const std::span<const algo::PointToPoint> operations = call.p2p();
  const std::span<std::byte* const> buffers = call.buffers();
  std::lock_guard lock(runner_.mutex());
  std::vector<StagedBuffer> staged(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    staged[i] = {buffers[i], operations[i].bytes, operations[i].send};
  }
  staging_.stage_each("send/recv", staged, [&](std::span<std::byte* const> host) {
    point_to_point_host(operations, host);
  });
}

int Communicator::receive_from_any(std::byte* buffer, size_t bytes) {
  drain_background();
  async_.wait_queued("cclRecvAnySource");
  std::lock_guard lock(runner_.mutex());
  runner_.check_usable("cclRecvAnySource");
  // Usage errors before the operation starts: they leave the communicator usable.
  const std::vector<int> peers = peers_.executor().probe_peers(rank(), "cclRecvAnySource");
  const CallMemory memory = peers_.resolve_memory("cclRecvAnySource", buffer, buffer);
  if (!is_host_memory(memory.input_kind)) {
    throw_error(cclInvalidUsage,
                "cclRecvAnySource: recvbuff is %s memory; a receive from any source takes host "
                "memory (device buffers move as device programs, which name their peer)",
                memory_kind_name(memory.input_kind));
  }
  int source = -1;
  {
    const OpRunner::OpScope scope = runner_.begin_op({OpKind::SendRecv, 1, -1, -1, -1, -1});
    runner_.run_op("recv from any source", [&](Deadline deadline, const algo::OpLabel& name) {
      source = peers_.executor().probe_any(peers, deadline, name);
    });
  }
  const algo::PointToPoint op{false, source, bytes};
  std::byte* const buffers[] = {buffer};
  point_to_point_host({&op, 1}, buffers);
  return source;
}

// The host path of each collective: the caller holds op_mutex_.

void Communicator::reduce_to(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                             cclRedOp_t op, int root) {
  const OpRunner::OpScope scope = runner_.begin_op(
      {root < 0 ? OpKind::AllReduce : OpKind::Reduce, count, type, op, root < 0 ? -1 : root});
  if (count == 0) return;
  const Reduction reduction = reduction_ops_.resolve(op, type, nranks());
  const algo::ExecOp& exec = reduction.exec;
  const void* input = runner_.reduction_input(reduction, sendbuff, count);
  const size_t bytes = count * exec.elem_size;
  const tune::Choice choice =
      planner_.plan(root < 0 ? tune::Collective::AllReduce : tune::Collective::Reduce, bytes);
  // A direct reduce is an allreduce whose non-roots drop the result into scratch: through shared
  // memory every rank reducing costs no more than one rank doing it.
  void* output = choice.entry->run != nullptr && root >= 0 && rank() != root
                     ? runner_.scratch(bytes)
                     : recvbuff;
  runner_.run_choice(choice, root < 0 ? "allreduce" : "reduce", input, output, count, bytes, exec,
                     root);
}

void Communicator::broadcast_host(const void* sendbuff, void* recvbuff, size_t count,
                                  cclDataType_t type, int root) {
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::Broadcast, count, type, -1, root});
  if (count == 0) return;
  const algo::ExecOp exec = copy_op(type);
  const size_t bytes = count * exec.elem_size;
  const tune::Choice choice = planner_.plan(tune::Collective::Broadcast, bytes);
  const CallMemory memory = peers_.resolve_memory("broadcast", sendbuff, recvbuff);
  // Registered buffers (cclMemAlloc) take one copy per byte, whatever the size: the tuner's
  // choice is only asked to allow the direct path.
  algo::DirectCollectives* direct = peers_.direct();
  if (direct && bytes >= algo::DirectCollectives::kRegisteredBroadcastMin &&
      planner_.tuner().selection().allows(tune::Collective::Broadcast, tune::Algorithm::Direct)) {
    bool done = false;
    runner_.note_algorithm("direct", nullptr);  // run_choice notes its own if this declines
    runner_.run_op("broadcast", [&](Deadline deadline, const algo::OpLabel& name) {
      done = direct->broadcast_registered(sendbuff, recvbuff, bytes, root, deadline, name,
                                          rank() == root ? memory.input : memory.output);
    });
    if (done) {
      CCL_TRACE(kColl, "broadcast #%llu: one copy through registered memory",
                static_cast<unsigned long long>(runner_.sequence()));
      return;
    }
  }
  runner_.run_choice(choice, "broadcast", sendbuff, recvbuff, count, bytes, exec, root, &memory);
}

void Communicator::all_gather_host(const void* sendbuff, void* recvbuff, size_t sendcount,
                                   cclDataType_t type) {
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::AllGather, sendcount, type});
  if (sendcount == 0) return;
  const algo::ExecOp exec = copy_op(type);
  const size_t bytes = sendcount * exec.elem_size;
  const tune::Choice choice = planner_.plan(tune::Collective::AllGather, bytes);
  runner_.run_choice(choice, "allgather", sendbuff, recvbuff, sendcount, bytes, exec, -1);
}

void Communicator::all_gather_v_host(const void* sendbuff, void* recvbuff,
                                     std::span<const size_t> counts, std::span<const size_t> displs,
                                     cclDataType_t type) {
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::AllGatherV, sum(counts), type});
  const algo::ExecOp exec = copy_op(type);
  runner_.note_algorithm("ring", nullptr);
  runner_.execute(algo::ring_allgatherv(
                      planner_.ring_params(counts[rank()], exec.elem_size, planner_.chunk_bytes()),
                      counts, displs),
                  sendbuff, recvbuff, exec, "allgatherv");
}

void Communicator::reduce_scatter_host(const void* sendbuff, void* recvbuff, size_t recvcount,
                                       cclDataType_t type, cclRedOp_t op) {
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::ReduceScatter, recvcount, type, op});
  if (recvcount == 0) return;
  const Reduction reduction = reduction_ops_.resolve(op, type, nranks());
  const void* input = runner_.reduction_input(reduction, sendbuff, recvcount * nranks());
  const tune::Choice choice =
      planner_.plan(tune::Collective::ReduceScatter, recvcount * reduction.exec.elem_size);
  runner_.run_choice(choice, "reducescatter", input, recvbuff, recvcount,
                     recvcount * reduction.exec.elem_size, reduction.exec, -1);
}

void Communicator::all_to_all_host(const void* sendbuff, void* recvbuff, size_t count,
                                   cclDataType_t type) {
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::AlltoAll, count, type});
  if (count == 0) return;
  const algo::ExecOp exec = copy_op(type);
  const size_t bytes = count * exec.elem_size;  // to each peer
  const tune::Choice choice = planner_.plan(tune::Collective::AlltoAll, bytes);
  // In place, the pairwise exchange's received blocks would overwrite blocks not yet sent: it
  // sends from a copy (the direct path reads every block before it writes any).
  const void* input = sendbuff == recvbuff && choice.entry->run == nullptr
                          ? runner_.staged_copy(sendbuff, bytes * nranks())
                          : sendbuff;
  runner_.run_choice(choice, "alltoall", input, recvbuff, count, bytes, exec, -1);
}

void Communicator::all_to_all_v_host(const void* sendbuff, std::span<const size_t> sendcounts,
                                     std::span<const size_t> sdispls, void* recvbuff,
                                     std::span<const size_t> recvcounts,
                                     std::span<const size_t> rdispls, cclDataType_t type) {
  // Its count: the elements this rank sends (the ranks' differ; the check mode compares none).
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::AlltoAllV, sum(sendcounts), type});
  const algo::ExecOp exec = copy_op(type);
  const void* input = sendbuff;
  if (sendbuff == recvbuff) {
    input = runner_.staged_copy(sendbuff, extent_bytes(sendcounts, sdispls, exec.elem_size));
  }
  runner_.note_algorithm("pairwise", nullptr);
  runner_.execute(
      algo::pairwise_alltoallv(nranks(), rank(), sendcounts, sdispls, recvcounts, rdispls), input,
      recvbuff, exec, "alltoallv");
}

void Communicator::barrier(const Call& call) {
  if (device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::Barrier});
  runner_.run_choice(planner_.plan(tune::Collective::Barrier, 0), "barrier", nullptr, nullptr, 0, 0,
                     copy_op(cclUint8), -1);
}

void Communicator::point_to_point_host(std::span<const algo::PointToPoint> operations,
                                       std::span<std::byte* const> buffers) {
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::SendRecv, operations.size(), -1, -1, -1,
                                                    operations.empty() ? -1 : operations[0].peer});
  runner_.note_group(operations);
  const algo::Schedule schedule = algo::point_to_point(rank(), operations);
  if (schedule.round_count() == 0) return;
  // Each operation's buffer resolved once (call_memory.h); one kernel row must reach them all.
  std::vector<const transport::RegisteredRegion*> regions(buffers.size());
  algo::ExecOp exec;
  exec.elem_size = 1;  // regions in bytes: the operations of a group may mix datatypes
  exec.point_to_point = true;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const CallMemory m = peers_.resolve_memory("send/recv", buffers[i], buffers[i]);
    regions[i] = m.input;
    exec.kernels = algo::kernels_for(exec.kernels->kind, m.input_kind);
    if (exec.kernels == nullptr) {
      throw_error(cclInvalidArgument,
                  "send/recv: the group mixes %s memory with memory no kernel row reaches "
                  "together with it",
                  memory_kind_name(m.input_kind));
    }
  }
  algo::ExecBuffers exec_buffers{nullptr, nullptr, nullptr, buffers, nullptr, nullptr, regions};
  runner_.run_op("send/recv", [&](Deadline deadline, const algo::OpLabel& name) {
    peers_.executor().run(schedule, exec_buffers, exec, deadline, name);
  });
}

void Communicator::finalize() {
  async_.wait_queued();
  std::lock_guard lock(runner_.mutex());  // lets an operation of another thread finish
  runner_.check_usable("cclCommFinalize");
  status_.mark_finalized();
  runner_.write_trace();  // no operation runs after this one
}

}  // namespace ccl
