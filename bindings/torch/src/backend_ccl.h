// BackendCcl: ccl's torch.distributed backend, a c10d::Backend (torch 2.x) on ccl's C API. torch's
// ProcessGroup dispatches a group's CPU operations to it. Every operation checks its tensors,
// queues the ccl call on the group's stream (OpLane) and returns at once with a WorkCcl whose
// future completes with the outputs; operations of one group run in issue order.
//
// How torch's operations map onto ccl (CPU tensors; one tensor per process where torch passes a
// list for the multi-device API):
//   broadcast, allreduce, reduce, barrier       the same ccl collective, in place
//   allreduce (allreduce_sparse) of a sparse COO tensor (SUM)   indices and values allgathered,
//                                                then coalesced
//   allreduce_coalesced                          one allreduce of the tensors packed together
//   allgather, allgather_coalesced, _allgather_base (all_gather_single),
//   allgather_into_tensor_coalesced (all_gather_single_coalesced)        cclAllGather
//   reduce_scatter, _reduce_scatter_base (reduce_scatter_single),
//   reduce_scatter_tensor_coalesced (reduce_scatter_single_coalesced)    cclReduceScatter
//   alltoall_base (all_to_all_single), alltoall  cclAlltoAll / cclAlltoAllV
//   gather, scatter                              one ccl group of sends and receives at the root
//   send, recv                                   cclSend / cclRecv, batched into groups (OpLane)
//   recv without src (recvAnysource)             cclRecvAnySource, blocking (see the .cc)
//   monitored_barrier                            check-ins through the group's store (below)
//   start/endCoalescing (batch_isend_irecv)      the operations between, as one Work
//   split (split_group, DeviceMesh)              cclCommSplit
//   shrink (shrink_group)                        cclCommShrink
// Refused with an exception naming the operation and why (ValueError for arguments): bitwise
// reductions, sparse tensors elsewhere, CUDA tensors, dtypes ccl lacks. Non-contiguous tensors
// are copied to contiguous buffers and, for outputs, copied back.
//
// The torch version differences (the torchcomms names, shrink, the Backend's feature macros) are
// compile-time branches in torch_compat.h, the one place that knows them.
//
// Recovering from a failed rank (backend_recovery.cc) maps onto ccl's calls of the same names:
// revoke, agree, failed_ranks, shrink and grow. A shrunk or grown backend stands on its new
// communicator alone: it needs no store, so the group that lost a rank (whose store rank 0 may
// have hosted) is never asked for anything again.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "cuda_lane.h"
#include "op_lane.h"
#include "tensor_args.h"
#include "torch_compat.h"
#include "work_ccl.h"

namespace ccl_torch {

// The name torch.distributed knows the backend by (ccl_torch.BACKEND; docs/torch.md says why
// this one).
extern const char* const kBackendName;

class BackendCcl : public c10d::Backend {
 public:
  BackendCcl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
             std::chrono::milliseconds timeout);
  // A backend over `comm` (from a split, a shrink or a grow; `rank` of `size` in it), which it
  // owns; without a store (monitoredBarrier refuses).
  BackendCcl(cclComm_t comm, int rank, int size, std::chrono::milliseconds timeout);
  ~BackendCcl() override;

  const std::string getBackendName() const override { return kBackendName; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  // Bounds every later wait of this group's (ccl's communicator timeout, cclCommSetTimeout).
  void setTimeout(std::chrono::milliseconds timeout) override;
  // What the first failed operation was: TIMEOUT, REMOTE_ERROR (a peer failed or the group was
  // revoked), COMM_ERROR (anything else of ccl's), or SUCCESS.
  c10d::ErrorType getError() override;
  // Operations issued on this group so far (the same on every rank when they issue alike).
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }
  // Completes the queued operations and releases the communicator (destroy_process_group).
  void shutdown() override;
  // Ends the group now (OpLane::abort): what is in flight fails at once, here and on the peers,
  // and every later operation raises.
  void abort() override;

  // batch_isend_irecv and _coalescing_manager: the operations issued between start and end are
  // posted as they come (sends and receives as one ccl group at the end); endCoalescing's Work
  // completes when all of them have.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // split_group (DeviceMesh): cclCommSplit over this group's communicator, which every rank of
  // the group calls; `ranks` are the new group's members in this group's ranks, in their new
  // order. A rank not among them gets no backend (nullptr), as torch expects.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(
      const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
#if CCL_TORCH_HAS_SHRINK
  // torch.distributed.shrink_group: cclCommShrink without the excluded ranks (shrink_flags 1:
  // abort what is in flight first, CCL_SHRINK_ABORT).
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts_override) override;
#endif

  // Recovery (backend_recovery.cc; each raises naming the ccl call and its error).
  // cclCommRevoke: every pending and later operation of the group fails at once on every rank.
  void revoke();
  // cclCommAgree: the AND of the flags of the live ranks, the same on each.
  int agree(int flag);
  // cclCommGetFailedRanks: the ranks of this group known to have failed, in increasing order.
  std::vector<int> failed_ranks();
  // cclCommShrink, by every rank not in `exclude`: a backend of the others, in their order. With
  // `abort`, what is in flight is aborted first, this backend takes no more operations, and an
  // empty `exclude` means the ranks the survivors agree have died. Without it, the queued
  // operations complete first, and it goes on working.
  c10::intrusive_ptr<BackendCcl> shrink_to(const std::vector<int>& exclude, bool abort);
  // cclCommGrow by a member (it keeps its rank), after the queued operations: a backend of
  // `nranks` with the newcomers, who meet at `unique_id` (CCL_UNIQUE_ID_BYTES bytes).
  c10::intrusive_ptr<BackendCcl> grow(int nranks, const std::string& unique_id);
  // cclCommGrow by a newcomer (comm NULL) taking `rank` of `nranks`. Without a timeout, the
  // communicator's is CCL_TIMEOUT.
  static c10::intrusive_ptr<BackendCcl> grow_as_newcomer(
      int nranks, int rank, const std::string& unique_id,
      std::optional<std::chrono::milliseconds> timeout);
  // cclGetUniqueId's bytes; this process serves the rendezvous until every rank has joined.
  static std::string unique_id();
  // OpLane::run_exclusive, for the training layer's hooks.
  void run_exclusive(const std::function<void(cclComm_t)>& fn) { lane_->run_exclusive(fn); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
#if CCL_TORCH_HAS_TORCHCOMMS_NAMES
  // torch's newer names for the same operations (torch's base class forwards either name to
  // the other; overriding both keeps a call one virtual hop from ccl).
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override {
    return _allgather_base(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    return allgather_into_tensor_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    return _reduce_scatter_base(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_tensor_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& output_splits,
                                                   std::vector<int64_t>& input_splits,
                                                   const c10d::AllToAllOptions& opts) override {
    return alltoall_base(output, input, output_splits, input_splits, opts);
  }
#endif
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // As Gloo's: every rank checks in with rank 0, which waits for each until opts.timeout and
  // raises naming the first late rank ("Rank 2 failed to pass monitoredBarrier in 1000 ms"), or
  // every late one with wait_all_ranks ("Ranks 1, 2 failed ..."); the others raise if rank 0's
  // release does not come in time. Through the group's store, not the communicator: a rank that
  // never arrives leaves no operation queued in the group, which goes on working. A timeout of
  // 0 (Gloo takes it) means no waiting: only ranks already checked in count as arrived.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

 private:
  // A work whose future holds `outputs`; `inputs` go with its profiler span (WorkCcl), named
  // `span` or after `type`; its wait bounded by setTimeout's timeout, if one was set.
  c10::intrusive_ptr<WorkCcl> new_work(c10d::OpType type, const char* name,
                                       std::vector<at::Tensor> outputs,
                                       const std::vector<at::Tensor>& inputs,
                                       const char* span = nullptr);
  // Queues a reduction: creates (and, once done, destroys) the PreMulSum op it may need.
  using ReduceLaunch = std::function<cclResult_t(cclComm_t, cclStream_t, cclRedOp_t)>;
  // Queues on the work's lane: the CUDA lane for a work of CUDA tensors, else the host lane.
  void submit(const c10::intrusive_ptr<WorkCcl>& work, Launch launch);
  void submit_p2p(const c10::intrusive_ptr<WorkCcl>& work, Launch launch);
  // The CUDA device of an operation's tensors, none for CPU tensors; refuses a mix.
  static std::optional<c10::Device> cuda_device_of(const char* op,
                                                   const std::vector<at::Tensor>& outputs,
                                                   const std::vector<at::Tensor>& inputs);
  // The group's CUDA lane on `device`, opened on first use (collective: every rank's first CUDA
  // operation of the group opens it); one device per group.
  std::shared_ptr<CudaLane> cuda_lane(const char* op, c10::Device device);
  // Drops the CUDA lane (its destructor waits for its stream), first aborting it with `abort`.
  void close_cuda(bool abort);
  void submit_reduction(const c10::intrusive_ptr<WorkCcl>& work, const Reduction& reduction,
                        cclDataType_t type, ReduceLaunch launch);
  void check_rank(const char* op, const char* what, int64_t rank) const;
  // allreduce of one sparse COO tensor (SUM): gathered and coalesced, as Gloo does.
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts);
  // Reduce-scatters `send` (contiguous, size x output's elements) into `output`, as `work`.
  c10::intrusive_ptr<WorkCcl> reduce_scatter_from(const c10::intrusive_ptr<WorkCcl>& work,
                                                  const at::Tensor& send, const at::Tensor& output,
                                                  const Reduction& reduction, cclDataType_t type);
  // A reused staging buffer of `numel` elements of `like`'s dtype (OpLane::staging).
  at::Tensor staging(const c10::intrusive_ptr<WorkCcl>& work, int64_t numel,
                     const at::Tensor& like);
  // Adopts a communicator a split, shrink or grow made: a backend of its own rank and size.
  static c10::intrusive_ptr<BackendCcl> adopt(cclComm_t comm, std::chrono::milliseconds timeout);

  std::shared_ptr<OpLane> lane_;
  std::mutex cuda_mutex_;
  std::shared_ptr<CudaLane> cuda_;  // under cuda_mutex_; opened by the first CUDA operation
  std::optional<c10::Device> coalesced_device_;  // a CUDA operation since startCoalescing
  c10::intrusive_ptr<c10d::Store> store_;        // monitoredBarrier's check-ins
  // The group's timeout, where a call gives none (init's, then setTimeout's), and the bound of
  // a work's wait once setTimeout was called (kNoTimeout before: the communicator's bounds it).
  // Atomic: setTimeout may run while another thread (DDP's autograd thread) issues operations.
  std::atomic<std::chrono::milliseconds> timeout_;
  std::atomic<std::chrono::milliseconds> wait_bound_{kNoTimeout};
  uint64_t monitored_rounds_ = 0;      // monitoredBarrier calls so far (alike on every rank)
  std::atomic<uint64_t> sequence_{0};  // operations issued (getSequenceNumberForGroup)
  bool coalescing_ = false;            // between startCoalescing and endCoalescing
  c10::intrusive_ptr<c10d::Backend::Options> options_;
};

}  // namespace ccl_torch
