// The collectives of a communicator: each asks the planner for its algorithm (the direct,
// shared-window path when every rank shares memory and the message fits the window, else a
// schedule, cached per shape) and runs it through the op runner, under op_mutex_.
#include <algorithm>
#include <cstring>
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

}  // namespace

// The public collectives: their buffers as the staging sees them (what each rank reads and
// writes), then the host path. Device buffers go through pinned host memory (device_staging.h).

bool Communicator::device_collective(const DeviceCall& call, std::optional<void*> cuda_stream) {
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

void Communicator::all_reduce(const void* sendbuff, void* recvbuff, size_t count,
                              cclDataType_t type, cclRedOp_t op) {
  if (count > 0 && device_collective(device_call(OpKind::AllReduce, "cclAllReduce", sendbuff,
                                                 recvbuff, count, type, op),
                                     std::nullopt)) {
    return;
  }
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = count * reduce::datatype_size(type);
  if (staging_chunks_ && bytes > staging_chunk_) {
    staging_.stage_chunks(
        "allreduce", {sendbuff, bytes}, {recvbuff, bytes}, reduce::datatype_size(type), count,
        staging_chunk_,
        [&](const void* in, void* out, size_t, size_t n) { reduce_to(in, out, n, type, op, -1); });
    return;
  }
  staging_.stage("allreduce", {sendbuff, bytes}, {recvbuff, bytes},
                 [&](const void* in, void* out) { reduce_to(in, out, count, type, op, -1); });
}

void Communicator::reduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                          cclRedOp_t op, int root) {
  if (count > 0 && device_collective(device_call(OpKind::Reduce, "cclReduce", sendbuff, recvbuff,
                                                 count, type, op, root),
                                     std::nullopt)) {
    return;
  }
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = count * reduce::datatype_size(type);
  const CallBuffer output{recvbuff, rank() == root ? bytes : 0};
  if (staging_chunks_ && bytes > staging_chunk_) {
    staging_.stage_chunks("reduce", {sendbuff, bytes}, output, reduce::datatype_size(type), count,
                          staging_chunk_, [&](const void* in, void* out, size_t, size_t n) {
                            reduce_to(in, out, n, type, op, root);
                          });
    return;
  }
  staging_.stage("reduce", {sendbuff, bytes}, output,
                 [&](const void* in, void* out) { reduce_to(in, out, count, type, op, root); });
}

void Communicator::broadcast(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                             int root) {
  if (count > 0 && device_collective(device_call(OpKind::Broadcast, "cclBroadcast", sendbuff,
                                                 recvbuff, count, type, cclSum, root),
                                     std::nullopt)) {
    return;
  }
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = count * reduce::datatype_size(type);
  const CallBuffer input{sendbuff, rank() == root ? bytes : 0};
  if (staging_chunks_ && bytes > staging_chunk_) {
    staging_.stage_chunks("broadcast", input, {recvbuff, bytes}, reduce::datatype_size(type), count,
                          staging_chunk_, [&](const void* in, void* out, size_t, size_t n) {
                            broadcast_host(in, out, n, type, root);
                          });
    return;
  }
  staging_.stage("broadcast", input, {recvbuff, bytes},
                 [&](const void* in, void* out) { broadcast_host(in, out, count, type, root); });
}

void Communicator::all_gather(const void* sendbuff, void* recvbuff, size_t sendcount,
                              cclDataType_t type) {
  if (sendcount > 0 && device_collective(device_call(OpKind::AllGather, "cclAllGather", sendbuff,
                                                     recvbuff, sendcount, type),
                                         std::nullopt)) {
    return;
  }
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = sendcount * reduce::datatype_size(type);
  staging_.stage("allgather", {sendbuff, bytes}, {recvbuff, bytes * nranks()},
                 [&](const void* in, void* out) { all_gather_host(in, out, sendcount, type); });
}

void Communicator::all_gather_v(const void* sendbuff, void* recvbuff,
                                std::span<const size_t> counts, std::span<const size_t> displs,
                                cclDataType_t type) {
  DeviceCall call = device_call(OpKind::AllGatherV, "cclAllGatherV", sendbuff, recvbuff, 0, type);
  call.counts = counts;
  call.displs = displs;
  if (device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t elem = reduce::datatype_size(type);
  staging_.stage("allgatherv", {sendbuff, counts[rank()] * elem},
                 {recvbuff, extent_bytes(counts, displs, elem)}, [&](const void* in, void* out) {
                   all_gather_v_host(in, out, counts, displs, type);
                 });
}

void Communicator::reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                  cclDataType_t type, cclRedOp_t op) {
  if (recvcount > 0 && device_collective(device_call(OpKind::ReduceScatter, "cclReduceScatter",
                                                     sendbuff, recvbuff, recvcount, type, op),
                                         std::nullopt)) {
    return;
  }
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = recvcount * reduce::datatype_size(type);
  staging_.stage(
      "reducescatter", {sendbuff, bytes * nranks()}, {recvbuff, bytes},
      [&](const void* in, void* out) { reduce_scatter_host(in, out, recvcount, type, op); });
}

void Communicator::all_to_all(const void* sendbuff, void* recvbuff, size_t count,
                              cclDataType_t type) {
  if (count > 0 && device_collective(device_call(OpKind::AlltoAll, "cclAlltoAll", sendbuff,
                                                 recvbuff, count, type),
                                     std::nullopt)) {
    return;
  }
  std::lock_guard lock(runner_.mutex());
  const size_t bytes = count * reduce::datatype_size(type) * nranks();
  staging_.stage("alltoall", {sendbuff, bytes}, {recvbuff, bytes},
                 [&](const void* in, void* out) { all_to_all_host(in, out, count, type); });
}

void Communicator::all_to_all_v(const void* sendbuff, std::span<const size_t> sendcounts,
                                std::span<const size_t> sdispls, void* recvbuff,
                                std::span<const size_t> recvcounts, std::span<const size_t> rdispls,
                                cclDataType_t type) {
  DeviceCall call = device_call(OpKind::AlltoAllV, "cclAlltoAllV", sendbuff, recvbuff, 0, type);
  call.counts = sendcounts;
  call.displs = sdispls;
  call.recvcounts = recvcounts;
  call.rdispls = rdispls;
  if (device_collective(call, std::nullopt)) return;
  std::lock_guard lock(runner_.mutex());
  const size_t elem = reduce::datatype_size(type);
  staging_.stage("alltoallv", {sendbuff, extent_bytes(sendcounts, sdispls, elem)},
                 {recvbuff, extent_bytes(recvcounts, rdispls, elem)},
                 [&](const void* in, void* out) {
                   all_to_all_v_host(in, sendcounts, sdispls, out, recvcounts, rdispls, type);
                 });
}

void Communicator::point_to_point(std::span<const algo::PointToPoint> operations,
                                  std::span<std::byte* const> buffers) {
  DeviceCall call = device_call(OpKind::SendRecv, "cclSend/cclRecv", nullptr, nullptr, 0, cclUint8);
  call.p2p = operations;
  call.buffers = buffers;
  if (device_collective(call, std::nullopt)) return;
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
  size_t total = 0;
  for (size_t c : counts) total += c;
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::AllGatherV, total, type});
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
  const OpRunner::OpScope scope = runner_.begin_op({OpKind::AlltoAllV, 0, type});
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

void Communicator::barrier() {
  if (device_collective(device_call(OpKind::Barrier, "cclBarrier", nullptr, nullptr, 0, cclUint8),
                        std::nullopt)) {
    return;
  }
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
