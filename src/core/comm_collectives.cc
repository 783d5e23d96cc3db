// The collectives of a communicator: each picks the direct (shared-window) path when every rank
// shares memory and the message fits the window, else runs a schedule (cached per shape) through
// the executor.
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
#include "core/comm.h"
#include "core/tuning/registry.h"

namespace ccl {

namespace {

algo::ExecOp copy_op(cclDataType_t type) {
  algo::ExecOp exec;
  exec.elem_size = reduce::datatype_size(type);
  return exec;
}

}  // namespace

void Communicator::check_usable(const char* what) const {
  if (!async_.ready()) async_.wait_initialized(what);
  status_.throw_if_unusable(what);
}

Communicator::OpScope Communicator::begin_op(const OpInfo& info) {
  const char* name = op_kind_name(info.kind);
  check_usable(name);
  ++sequence_;
  op_start_ = Clock::now();
  record_ = recorder_->begin(OpRecord{sequence_, name, info.count, info.datatype, info.op,
                                      info.root, info.peer, nullptr, nullptr, 0});
  record_ended_ = false;
  if (check_mode_ && info.kind != OpKind::SendRecv) check_agreement(info);
  return OpScope(this);
}

Communicator::OpScope::~OpScope() {
  if (comm_->record_ended_) return;
  comm_->record_ended_ = true;
  const bool failed = std::uncaught_exceptions() > unwinding_;
  comm_->recorder_->end(comm_->record_,
                        failed ? FlightRecorder::State::Failed : FlightRecorder::State::Completed,
                        failed ? cclInternalError : cclSuccess);
}

void Communicator::end_record(const Error& error) {
  if (record_ended_) return;
  record_ended_ = true;
  FlightRecorder::State state = error.code() == cclTimeout ? FlightRecorder::State::TimedOut
                                : status_.aborted()        ? FlightRecorder::State::Aborted
                                                           : FlightRecorder::State::Failed;
  recorder_->end(record_, state, error.code());
  recorder_->dump(error.what());
}

void Communicator::check_agreement(const OpInfo& info) {
  const OpDescriptor mine = describe(info, ++checked_collectives_);
  std::vector<OpDescriptor> all(nranks_);
  const size_t bytes = sizeof(OpDescriptor);
  // Through the message rings, not the shared window: the window's mailboxes make every rank
  // wait until all have finished the previous operation, which costs more than the exchange.
  tune::Choice ring;
  ring.entry = tune::find_entry(tune::Collective::AllGather, tune::Algorithm::Ring);
  ring.algorithm = tune::Algorithm::Ring;
  execute(cached(ring, bytes, -1, 1), &mine, all.data(), copy_op(cclUint8), "check");
  const std::string mismatch = mismatch_message(all);
  if (mismatch.empty()) return;
  // Every rank saw the same table, so every rank fails here with the same message. No notice:
  // it could reach a peer still in the exchange and fail it as "rank N failed" instead.
  const Error error(cclInvalidUsage, std::string("CCL_CHECK_MODE: ") + mismatch);
  end_record(error);
  status_.mark_failed(error.code());
  throw error;
}

const algo::Schedule& Communicator::cached(const tune::Choice& choice, size_t count, int root,
                                           size_t elem_size) {
  const auto key = std::make_tuple(static_cast<int>(choice.entry->collective),
                                   static_cast<int>(choice.algorithm), choice.chunk_bytes, count,
                                   root, elem_size);
  auto it = schedules_.find(key);
  if (it != schedules_.end()) return it->second;
  if (schedules_.size() >= 256) schedules_.clear();  // bounded memory for sweeping sizes
  const tune::BuildArgs args{
      ring_params(count, elem_size, choice.chunk_bytes),
      schedule_params(count, elem_size, choice.chunk_bytes, layout_.tree_order), root,
      layout_.host_of_rank};
  return schedules_.emplace(key, choice.entry->build(args)).first->second;
}

void Communicator::run_choice(const tune::Choice& choice, const char* what, const void* input,
                              void* output, size_t count, size_t bytes, const algo::ExecOp& exec,
                              int root) {
  if (choice.entry->run == nullptr) {
    return execute(cached(choice, count, root, exec.elem_size), input, output, exec, what);
  }
  if (!direct_) throw_error(cclInternalError, "%s: a direct algorithm without a window", what);
  run_op(what, [&](Deadline deadline, const algo::OpLabel& name) {
    choice.entry->run(tune::RunArgs{*direct_, input, output, bytes, count, exec, root,
                                    choice.protocol, deadline, name});
  });
}

algo::ScheduleParams Communicator::schedule_params(size_t count, size_t elem_size,
                                                   size_t chunk_bytes,
                                                   std::span<const int> order) const {
  algo::ScheduleParams params;
  params.nranks = nranks_;
  params.rank = rank_;
  params.count = count;
  params.chunk_elems = chunk_bytes / elem_size;
  params.order = order;
  return params;
}

namespace {

// Buffers kept for the life of the communicator: touched once, no page faults on later calls.
std::byte* at_least(std::vector<std::byte>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

}  // namespace

void* Communicator::scratch(size_t bytes) { return at_least(scratch_, bytes); }

const void* Communicator::reduction_input(const Reduction& r, const void* sendbuff, size_t count) {
  if (r.scale == nullptr) return sendbuff;
  std::byte* scaled = at_least(staging_, count * r.exec.elem_size);
  r.scale(scaled, sendbuff, count, r.scalar.data());
  return scaled;
}

const void* Communicator::staged_copy(const void* data, size_t bytes) {
  std::byte* copy = at_least(staging_, bytes);
  if (bytes != 0) memcpy(copy, data, bytes);
  return copy;
}

template <typename Body>
void Communicator::run_op(const char* what, Body&& body) {
  algo::OpLabel name{what, sequence_, &pending_observer_};
  pending_now_.clear();
  try {
    body(Deadline(op_start_ + options_.timeout), name);
  } catch (const Error& e) {
    // Errors from inside a transport do not know the operation: name it (and its number).
    const std::string label = name.str();
    Error named = std::string_view(e.what()).starts_with(label)
                      ? e
                      : Error(e.code(), label + ": " + e.what(), e.culprit(), e.origin());
    if (named.code() == cclTimeout) named = resolve_timeout(named, label);
    end_record(named);
    record_failure(named);
    throw named;
  }
}

void Communicator::execute(const algo::Schedule& schedule, const void* input, void* output,
                           const algo::ExecOp& op, const char* what) {
  // Every schedule gets the scratch it asks for, whatever the collective.
  algo::ExecBuffers buffers{input, output, scratch(schedule.scratch_elems * op.elem_size), {}};
  run_op(what, [&](Deadline deadline, const algo::OpLabel& name) {
    CCL_TRACE(kColl, "%s: %zu rounds", name.str().c_str(), schedule.round_count());
    executor_->run(schedule, buffers, op, deadline, name);
  });
}

void Communicator::all_reduce(const void* sendbuff, void* recvbuff, size_t count,
                              cclDataType_t type, cclRedOp_t op) {
  std::lock_guard lock(op_mutex_);
  reduce_to(sendbuff, recvbuff, count, type, op, -1);
}

void Communicator::reduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                          cclRedOp_t op, int root) {
  std::lock_guard lock(op_mutex_);
  reduce_to(sendbuff, recvbuff, count, type, op, root);
}

void Communicator::reduce_to(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                             cclRedOp_t op, int root) {
  const OpScope scope = begin_op(
      {root < 0 ? OpKind::AllReduce : OpKind::Reduce, count, type, op, root < 0 ? -1 : root});
  if (count == 0) return;
  const Reduction reduction = reduction_ops_.resolve(op, type, nranks_);
  const algo::ExecOp& exec = reduction.exec;
  const void* input = reduction_input(reduction, sendbuff, count);
  const size_t bytes = count * exec.elem_size;
  const tune::Choice choice =
      plan(root < 0 ? tune::Collective::AllReduce : tune::Collective::Reduce, bytes);
  // A direct reduce is an allreduce whose non-roots drop the result into scratch: through shared
  // memory every rank reducing costs no more than one rank doing it.
  void* output =
      choice.entry->run != nullptr && root >= 0 && rank_ != root ? scratch(bytes) : recvbuff;
  run_choice(choice, root < 0 ? "allreduce" : "reduce", input, output, count, bytes, exec, root);
}

void Communicator::broadcast(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                             int root) {
  std::lock_guard lock(op_mutex_);
  const OpScope scope = begin_op({OpKind::Broadcast, count, type, -1, root});
  if (count == 0) return;
  const algo::ExecOp exec = copy_op(type);
  const size_t bytes = count * exec.elem_size;
  const tune::Choice choice = plan(tune::Collective::Broadcast, bytes);
  // Registered buffers (cclMemAlloc) take one copy per byte, whatever the size: the tuner's
  // choice is only asked to allow the direct path.
  if (direct_ && bytes >= algo::DirectCollectives::kRegisteredBroadcastMin &&
      tuner_->selection().allows(tune::Collective::Broadcast, tune::Algorithm::Direct)) {
    bool done = false;
    run_op("broadcast", [&](Deadline deadline, const algo::OpLabel& name) {
      done = direct_->broadcast_registered(sendbuff, recvbuff, bytes, root, deadline, name);
    });
    if (done) {
      CCL_TRACE(kColl, "broadcast #%llu: one copy through registered memory",
                static_cast<unsigned long long>(sequence_));
      return;
    }
  }
  run_choice(choice, "broadcast", sendbuff, recvbuff, count, bytes, exec, root);
}

void Communicator::all_gather(const void* sendbuff, void* recvbuff, size_t sendcount,
                              cclDataType_t type) {
  std::lock_guard lock(op_mutex_);
  const OpScope scope = begin_op({OpKind::AllGather, sendcount, type});
  if (sendcount == 0) return;
  const algo::ExecOp exec = copy_op(type);
  const size_t bytes = sendcount * exec.elem_size;
  const tune::Choice choice = plan(tune::Collective::AllGather, bytes);
  run_choice(choice, "allgather", sendbuff, recvbuff, sendcount, bytes, exec, -1);
}

void Communicator::all_gather_v(const void* sendbuff, void* recvbuff,
                                std::span<const size_t> counts, std::span<const size_t> displs,
                                cclDataType_t type) {
  std::lock_guard lock(op_mutex_);
  size_t total = 0;
  for (size_t c : counts) total += c;
  const OpScope scope = begin_op({OpKind::AllGatherV, total, type});
  const algo::ExecOp exec = copy_op(type);
  execute(algo::ring_allgatherv(ring_params(counts[rank_], exec.elem_size, chunk_bytes_), counts,
                                displs),
          sendbuff, recvbuff, exec, "allgatherv");
}

void Communicator::reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                  cclDataType_t type, cclRedOp_t op) {
  std::lock_guard lock(op_mutex_);
  const OpScope scope = begin_op({OpKind::ReduceScatter, recvcount, type, op});
  if (recvcount == 0) return;
  const Reduction reduction = reduction_ops_.resolve(op, type, nranks_);
  const void* input = reduction_input(reduction, sendbuff, recvcount * nranks_);
  const tune::Choice choice =
      plan(tune::Collective::ReduceScatter, recvcount * reduction.exec.elem_size);
  run_choice(choice, "reducescatter", input, recvbuff, recvcount,
             recvcount * reduction.exec.elem_size, reduction.exec, -1);
}

void Communicator::all_to_all(const void* sendbuff, void* recvbuff, size_t count,
                              cclDataType_t type) {
  std::lock_guard lock(op_mutex_);
  const OpScope scope = begin_op({OpKind::AlltoAll, count, type});
  if (count == 0) return;
  const algo::ExecOp exec = copy_op(type);
  const size_t bytes = count * exec.elem_size;  // to each peer
  const tune::Choice choice = plan(tune::Collective::AlltoAll, bytes);
  // In place, the pairwise exchange's received blocks would overwrite blocks not yet sent: it
  // sends from a copy (the direct path reads every block before it writes any).
  const void* input = sendbuff == recvbuff && choice.entry->run == nullptr
                          ? staged_copy(sendbuff, bytes * nranks_)
                          : sendbuff;
  run_choice(choice, "alltoall", input, recvbuff, count, bytes, exec, -1);
}

void Communicator::all_to_all_v(const void* sendbuff, std::span<const size_t> sendcounts,
                                std::span<const size_t> sdispls, void* recvbuff,
                                std::span<const size_t> recvcounts, std::span<const size_t> rdispls,
                                cclDataType_t type) {
  std::lock_guard lock(op_mutex_);
  const OpScope scope = begin_op({OpKind::AlltoAllV, 0, type});
  const algo::ExecOp exec = copy_op(type);
  const void* input = sendbuff;
  if (sendbuff == recvbuff) {
    size_t extent = 0;
    for (int q = 0; q < nranks_; ++q) {
      if (sendcounts[q] != 0) extent = std::max(extent, sdispls[q] + sendcounts[q]);
    }
    input = staged_copy(sendbuff, extent * exec.elem_size);
  }
  execute(algo::pairwise_alltoallv(nranks_, rank_, sendcounts, sdispls, recvcounts, rdispls), input,
          recvbuff, exec, "alltoallv");
}

void Communicator::barrier() {
  std::lock_guard lock(op_mutex_);
  const OpScope scope = begin_op({OpKind::Barrier});
  run_choice(plan(tune::Collective::Barrier, 0), "barrier", nullptr, nullptr, 0, 0,
             copy_op(cclUint8), -1);
}

void Communicator::point_to_point(std::span<const algo::PointToPoint> operations,
                                  std::span<std::byte* const> buffers) {
  std::lock_guard lock(op_mutex_);
  const OpScope scope = begin_op({OpKind::SendRecv, operations.size(), -1, -1, -1,
                                  operations.empty() ? -1 : operations[0].peer});
  const algo::Schedule schedule = algo::point_to_point(rank_, operations);
  if (schedule.round_count() == 0) return;
  algo::ExecBuffers exec_buffers{nullptr, nullptr, nullptr, buffers};
  algo::ExecOp exec;
  exec.elem_size = 1;  // regions in bytes: the operations of a group may mix datatypes
  run_op("send/recv", [&](Deadline deadline, const algo::OpLabel& name) {
    executor_->run(schedule, exec_buffers, exec, deadline, name);
  });
}

void Communicator::finalize() {
  async_.wait_queued();
  std::lock_guard lock(op_mutex_);  // lets an operation of another thread finish
  check_usable("cclCommFinalize");
  status_.mark_finalized();
}

}  // namespace ccl
