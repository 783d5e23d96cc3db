#include "backend_ccl.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <numeric>
#include <optional>
#include <utility>

#include "cuda_lane.h"
#include "store_rendezvous.h"

namespace ccl_torch {

const char* const kBackendName = "ccl_torch";

namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// Lets go of the GIL for its scope if this thread holds it (torch's binding may have let go of it
// already): for waits that may take the whole timeout, or need the watcher, which may need it.
class WithoutGil {
 public:
  WithoutGil() {
    if (Py_IsInitialized() != 0 && PyGILState_Check() != 0) released_.emplace();
  }

 private:
  std::optional<pybind11::gil_scoped_release> released_;
};

int64_t element_count(const std::vector<at::Tensor>& tensors);

// The tensors laid end to end in `buffer` (a copy); returns it.
at::Tensor pack_into(const at::Tensor& buffer, const std::vector<at::Tensor>& tensors) {
  int64_t at = 0;
  for (const auto& t : tensors) {
    buffer.narrow(0, at, t.numel()).view(t.sizes()).copy_(t);
    at += t.numel();
  }
  return buffer;
}

// Pairs that copy consecutive pieces of `buffer` (from element `offset`) back into `tensors`.
void unpack_into(std::vector<std::pair<at::Tensor, at::Tensor>>& pairs,
                 const std::vector<at::Tensor>& tensors, const at::Tensor& buffer, int64_t offset) {
  for (const auto& t : tensors) {
    pairs.emplace_back(t, buffer.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

int64_t element_count(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

void check_dtypes(const char* op, const std::vector<at::Tensor>& tensors, const at::Tensor& like) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(op, tensors[i]);
    TORCH_CHECK(tensors[i].scalar_type() == like.scalar_type(), "ccl ", op, ": tensor ", i, " is ",
                describe(tensors[i]), " but tensor 0 is ", describe(like));
  }
}

// Element counts and displacements of an alltoall side: `splits` in rows of dim 0 (empty: equal).
void alltoall_layout(const char* op, const char* side, const at::Tensor& t, int size,
                     const std::vector<int64_t>& splits, std::vector<size_t>& counts,
                     std::vector<size_t>& displs) {
  TORCH_CHECK(t.dim() >= 1 || splits.empty(), "ccl ", op,
              ": split sizes need a tensor with a "
              "first dimension");
  const int64_t rows = t.dim() >= 1 ? t.size(0) : t.numel();
  const int64_t row_elems = rows > 0 ? t.numel() / rows : 0;
  counts.assign(size, 0);
  displs.assign(size, 0);
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "ccl ", op, ": the ", side, " tensor's first dimension (", rows,
                ") does not split evenly over ", size, " ranks");
    for (int r = 0; r < size; ++r) {
      counts[r] = static_cast<size_t>(rows / size * row_elems);
      displs[r] = static_cast<size_t>(r * (rows / size) * row_elems);
    }
    return;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "ccl ", op, ": ", splits.size(), " ", side,
              " split sizes for ", size, " ranks");
  int64_t at_row = 0;
  for (int r = 0; r < size; ++r) {
    TORCH_CHECK(splits[r] >= 0, "ccl ", op, ": negative ", side, " split size ", splits[r]);
    counts[r] = static_cast<size_t>(splits[r] * row_elems);
    displs[r] = static_cast<size_t>(at_row * row_elems);
    at_row += splits[r];
  }
  TORCH_CHECK(at_row == rows, "ccl ", op, ": the ", side, " split sizes add up to ", at_row,
              " rows, the tensor has ", rows);
}

// Gather's and scatter's root: one ccl group that receives (or sends) piece `peer` of `flat` from
// (to) every other rank.
Launch root_exchange(const at::Tensor& flat, cclDataType_t type, int root, int size, bool receive) {
  return [flat, type, root, size, receive](cclComm_t comm, cclStream_t stream) {
    const size_t count = static_cast<size_t>(flat.numel() / size);
    cclResult_t r = cclGroupStart();
    if (r != cclSuccess) return r;
    for (int peer = 0; peer < size && r == cclSuccess; ++peer) {
      if (peer == root) continue;
      char* at = static_cast<char*>(flat.data_ptr()) + peer * count * flat.element_size();
      r = receive ? cclRecv(at, count, type, peer, comm, stream)
                  : cclSend(at, count, type, peer, comm, stream);
    }
    const cclResult_t end = cclGroupEnd();
    return r != cclSuccess ? r : end;
  };
}

}  // namespace

BackendCcl::BackendCcl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size),
      lane_(std::make_shared<OpLane>(make_comm(store, rank, size, timeout), rank, size)),
      store_(store),
      timeout_(timeout),
      options_(c10::make_intrusive<c10d::Backend::Options>(kBackendName, timeout)) {}

BackendCcl::~BackendCcl() {
  // Python drops the last reference with the GIL held, and the watcher may need the GIL to free
  // a tensor that has a Python object: let go of it while the watcher finishes.
  const WithoutGil no_gil;
  BackendCcl::shutdown();  // not virtually: the object is being destroyed
}

c10::intrusive_ptr<WorkCcl> BackendCcl::new_work(OpType type, const char* name,
                                                 std::vector<at::Tensor> outputs,
                                                 const std::vector<at::Tensor>& inputs,
                                                 const char* span) {
  const std::optional<c10::Device> device = cuda_device_of(name, outputs, inputs);
  std::vector<at::Tensor> touched;
  if (device) {
    touched = outputs;
    touched.insert(touched.end(), inputs.begin(), inputs.end());
  }
  ++sequence_;
  auto work =
      c10::make_intrusive<WorkCcl>(lane_, rank_, type, name, std::move(outputs), inputs, span);
  const std::chrono::milliseconds bound = wait_bound_.load();
  if (bound != kNoTimeout) work->set_wait_timeout(bound);
  if (device) {
    work->use_cuda(cuda_lane(name, *device), std::move(touched));
    if (coalescing_) coalesced_device_ = device;
  }
  return work;
}

std::optional<c10::Device> BackendCcl::cuda_device_of(const char* op,
                                                      const std::vector<at::Tensor>& outputs,
                                                      const std::vector<at::Tensor>& inputs) {
  std::optional<c10::Device> device;
  bool host = false;
  for (const auto* list : {&outputs, &inputs}) {
    for (const auto& t : *list) {
      if (!t.defined()) continue;
      if (!t.is_cuda()) {
        host = true;
        continue;
      }
      TORCH_CHECK_VALUE(!device || *device == t.device(), "ccl ", op, ": tensors on ", *device,
                        " and ", t.device(), " in one operation");
      device = t.device();
    }
  }
  TORCH_CHECK_VALUE(!device || !host, "ccl ", op, ": CPU and CUDA tensors in one operation (",
                    *device, "); pass them all on one device");
  return device;
}

std::shared_ptr<CudaLane> BackendCcl::cuda_lane(const char* op, c10::Device device) {
  std::lock_guard<std::mutex> lock(cuda_mutex_);
  if (!cuda_) {
    cuda_ = std::make_shared<CudaLane>(*lane_, op, device, timeout_.load());
  } else {
    TORCH_CHECK_VALUE(cuda_->device() == device, "ccl ", op, ": this process group runs on ",
                      cuda_->device(), ", not ", device, " (one device per process, as NCCL)");
  }
  return cuda_;
}

void BackendCcl::submit(const c10::intrusive_ptr<WorkCcl>& work, Launch launch) {
  if (CudaLane* cuda = work->cuda_lane()) {
    cuda->submit(work, std::move(launch));
  } else {
    lane_->submit(work, std::move(launch));
  }
}

void BackendCcl::submit_p2p(const c10::intrusive_ptr<WorkCcl>& work, Launch launch) {
  if (CudaLane* cuda = work->cuda_lane()) {
    cuda->submit_p2p(work, std::move(launch));
  } else {
    lane_->submit_p2p(work, std::move(launch));
  }
}

void BackendCcl::close_cuda(bool abort) {
  std::shared_ptr<CudaLane> cuda;
  {
    std::lock_guard<std::mutex> lock(cuda_mutex_);
    cuda.swap(cuda_);
  }
  if (cuda && abort) cuda->abort();
}

void BackendCcl::shutdown() {
  close_cuda(false);
  lane_->shut_down();
}

void BackendCcl::abort() {
  close_cuda(true);
  lane_->abort();
}

c10::intrusive_ptr<c10d::Backend::Options> BackendCcl::getBackendOptions() {
  options_->timeout = timeout_.load();
  return options_;
}

void BackendCcl::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK_VALUE(timeout.count() > 0, "ccl setTimeout: the timeout must be positive (",
                    timeout.count(), " ms)");
  timeout_.store(timeout);
  wait_bound_.store(timeout);
}

c10d::ErrorType BackendCcl::getError() {
  switch (lane_->first_failure()) {
    case cclSuccess:
    case cclInvalidArgument:  // refused arguments leave the group working
    case cclInvalidUsage:
      return c10d::ErrorType::SUCCESS;
    case cclTimeout:
      return c10d::ErrorType::TIMEOUT;
    case cclRemoteError:
      return c10d::ErrorType::REMOTE_ERROR;
    default:
      return c10d::ErrorType::COMM_ERROR;
  }
}

void BackendCcl::startCoalescing() {
  TORCH_CHECK(!coalescing_, "ccl startCoalescing: this group is coalescing already");
  coalescing_ = true;
}

// The operations issued since startCoalescing are queued (the sends and receives in the pending
// batch): the batch is posted now, and the returned work completes when the stream has run
// everything queued so far, them included.
c10::intrusive_ptr<c10d::Work> BackendCcl::endCoalescing() {
  TORCH_CHECK(coalescing_, "ccl endCoalescing: startCoalescing was not called");
  coalescing_ = false;
  auto work = new_work(OpType::COALESCED, "coalesced", {}, {});
  // After CUDA operations, a work of the CUDA lane: it posts their batch and ends after them.
  if (const auto device = std::exchange(coalesced_device_, std::nullopt)) {
    work->use_cuda(cuda_lane("endCoalescing", *device), {});
  }
  submit(work, [](cclComm_t, cclStream_t) { return cclSuccess; });
  return work;
}

at::Tensor BackendCcl::staging(const c10::intrusive_ptr<WorkCcl>& work, int64_t numel,
                               const at::Tensor& like) {
  if (like.is_cuda()) {
    // torch's caching allocator is the reuse on a device; the lane records it on its stream.
    at::Tensor buffer = at::empty({numel}, like.options());
    work->keep_for_stream(buffer);
    return buffer;
  }
  return lane_->staging(work, numel, like.options());
}

void BackendCcl::check_rank(const char* op, const char* what, int64_t rank) const {
  TORCH_CHECK(rank >= 0 && rank < size_, "ccl ", op, ": ", what, " ", rank,
              " is not a rank of this group (size ", size_, ")");
}

void BackendCcl::submit_reduction(const c10::intrusive_ptr<WorkCcl>& work,
                                  const Reduction& reduction, cclDataType_t type,
                                  ReduceLaunch launch) {
  WorkCcl* w = work.get();
  submit(work, [w, reduction, type, launch](cclComm_t comm, cclStream_t stream) {
    cclRedOp_t op = reduction.op;
    if (reduction.premul && w->cuda_lane() != nullptr) {
      op = w->cuda_lane()->premul_op(reduction.premul_factor, type);  // kept by the lane
    } else if (reduction.premul) {
      // Residence 0: ccl reads the factor now; the op lives until the work completes.
      const cclResult_t r =
          cclRedOpCreatePreMulSum(&op, reduction.premul_factor.data_ptr(), type, 0, comm);
      if (r != cclSuccess) return r;
      w->on_done([op, comm] { cclRedOpDestroy(op, comm); });
    }
    return launch(comm, stream, op);
  });
}

WorkPtr BackendCcl::broadcast(std::vector<at::Tensor>& tensors,
                              const c10d::BroadcastOptions& opts) {
  const char* name = "broadcast";
  const at::Tensor& t = single_tensor(name, tensors);
  const cclDataType_t type = datatype_of(name, t);
  check_rank(name, "root", opts.rootRank);
  TORCH_CHECK(opts.rootTensor == 0, "ccl ", name,
              ": rootTensor must be 0 (one tensor per process)");
  Staged s = stage_inout(t);
  auto work = new_work(OpType::BROADCAST, name, tensors, tensors);
  work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  const int root = static_cast<int>(opts.rootRank);
  submit(work, [buf, type, root](cclComm_t comm, cclStream_t stream) {
    return cclBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(), type, root, comm, stream);
  });
  return work;
}

WorkPtr BackendCcl::allreduce(std::vector<at::Tensor>& tensors,
                              const c10d::AllreduceOptions& opts) {
  const char* name = "allreduce";
  if (tensors.size() == 1 && tensors[0].is_sparse()) return sparse_allreduce(tensors, opts);
  const at::Tensor& t = single_tensor(name, tensors);
  const cclDataType_t type = datatype_of(name, t);
  const Reduction reduction = reduction_of(name, opts.reduceOp, t);
  Staged s = stage_inout(t);
  auto work = new_work(OpType::ALLREDUCE, name, tensors, tensors);
  work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  submit_reduction(
      work, reduction, type, [buf, type](cclComm_t comm, cclStream_t stream, cclRedOp_t op) {
        return cclAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), type, op, comm, stream);
      });
  return work;
}

// As Gloo does it: every rank's coalesced indices and values gathered (their counts first),
// then summed by coalescing the whole. The sizes decide the buffers, so the steps run as
// blocking calls with the group to themselves (run_exclusive), in the group's issue order.
WorkPtr BackendCcl::sparse_allreduce(std::vector<at::Tensor>& tensors,
                                     const c10d::AllreduceOptions& opts) {
  const char* name = "allreduce";
  at::Tensor& tensor = tensors[0];
  TORCH_CHECK(tensor.layout() == at::kSparse && tensor.device().is_cpu(), "ccl ", name,
              ": a sparse tensor must be a CPU COO tensor (", describe(tensor), ")");
  TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM, "ccl ", name,
              ": sparse tensors are summed only (ReduceOp.SUM), as Gloo does");
  const at::Tensor input = tensor.coalesce();
  const at::Tensor values = input._values().contiguous();  // nnz x the dense dimensions
  const cclDataType_t type = datatype_of(name, values);
  const at::Tensor indices = input._indices().t().contiguous();  // nnz x sparse_dim, int64
  const int64_t sparse_dim = input.sparse_dim();
  int64_t row = 1;  // elements of one value: the dense dimensions' product
  for (int64_t d = 1; d < values.dim(); ++d) row *= values.size(d);
  // Made first, so that its profiler span covers the exchange below (dropped if that raises).
  auto work = new_work(OpType::ALLREDUCE, name, tensors, tensors, "ccl:sparse_all_reduce");
  at::Tensor result;
  lane_->run_exclusive([&](cclComm_t comm) {
    const auto check = [&](cclResult_t r) {
      TORCH_CHECK(r == cclSuccess, lane_->error_text(name, r));
    };
    int64_t nnz = input._nnz();
    std::vector<int64_t> counts(size_);
    check(cclAllGather(&nnz, counts.data(), 1, cclInt64, comm, nullptr));
    std::vector<size_t> index_counts(size_), index_displs(size_), value_counts(size_),
        value_displs(size_);
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      TORCH_CHECK(counts[r] >= 0, "ccl ", name, ": rank ", r, " sent a negative count");
      index_counts[r] = static_cast<size_t>(counts[r] * sparse_dim);
      index_displs[r] = static_cast<size_t>(total * sparse_dim);
      value_counts[r] = static_cast<size_t>(counts[r] * row);
      value_displs[r] = static_cast<size_t>(total * row);
      total += counts[r];
    }
    at::Tensor all_indices = at::empty({total, sparse_dim}, indices.options());
    check(cclAllGatherV(indices.data_ptr(), index_counts[rank_], all_indices.data_ptr(),
                        index_counts.data(), index_displs.data(), cclInt64, comm, nullptr));
    std::vector<int64_t> value_shape = values.sizes().vec();
    value_shape[0] = total;
    at::Tensor all_values = at::empty(value_shape, values.options());
    check(cclAllGatherV(values.data_ptr(), value_counts[rank_], all_values.data_ptr(),
                        value_counts.data(), value_displs.data(), type, comm, nullptr));
    result = at::sparse_coo_tensor(all_indices.t(), all_values, input.sizes()).coalesce();
  });
  tensor.copy_(result);
  submit(work, [](cclComm_t, cclStream_t) { return cclSuccess; });  // done already
  return work;
}

WorkPtr BackendCcl::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                     const c10d::AllreduceOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1 && tensors[0].is_sparse(),
                    "ccl allreduce_sparse: takes one ", "sparse tensor per process");
  return sparse_allreduce(tensors, opts);
}

WorkPtr BackendCcl::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                        const c10d::AllreduceCoalescedOptions& opts) {
  const char* name = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "ccl ", name, ": no tensors");
  check_dtypes(name, tensors, tensors[0]);
  const cclDataType_t type = datatype_of(name, tensors[0]);
  const Reduction reduction = reduction_of(name, opts.reduceOp, tensors[0]);
  auto work = new_work(OpType::ALLREDUCE_COALESCED, name, tensors, tensors);
  at::Tensor buf = pack_into(staging(work, element_count(tensors), tensors[0]), tensors);
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  unpack_into(back, tensors, buf, 0);
  work->copy_back_after(std::move(back));
  submit_reduction(
      work, reduction, type, [buf, type](cclComm_t comm, cclStream_t stream, cclRedOp_t op) {
        return cclAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), type, op, comm, stream);
      });
  return work;
}

WorkPtr BackendCcl::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* name = "reduce";
  const at::Tensor& t = single_tensor(name, tensors);
  const cclDataType_t type = datatype_of(name, t);
  const Reduction reduction = reduction_of(name, opts.reduceOp, t);
  check_rank(name, "root", opts.rootRank);
  TORCH_CHECK(opts.rootTensor == 0, "ccl ", name,
              ": rootTensor must be 0 (one tensor per process)");
  const int root = static_cast<int>(opts.rootRank);
  Staged s = stage_inout(t);
  auto work = new_work(OpType::REDUCE, name, tensors, tensors);
  if (rank_ == root) work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  const bool is_root = rank_ == root;
  submit_reduction(work, reduction, type,
                   [buf, type, root, is_root](cclComm_t comm, cclStream_t stream, cclRedOp_t op) {
                     // A non-root's tensor is left as it was (ccl takes no receive buffer there).
                     return cclReduce(buf.data_ptr(), is_root ? buf.data_ptr() : nullptr,
                                      buf.numel(), type, op, root, comm, stream);
                   });
  return work;
}

WorkPtr BackendCcl::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                              std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  const char* name = "allgather";
  const at::Tensor& in = single_tensor(name, inputs);
  const cclDataType_t type = datatype_of(name, in);
  TORCH_CHECK(outputs.size() == 1, "ccl ", name, ": takes one output list per process, got ",
              outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "ccl ", name, ": ", outputs[0].size(),
              " output tensors for ", size_, " ranks");
  check_same_shape(name, outputs[0], in);
  at::Tensor send = in.contiguous();
  auto work = new_work(OpType::ALLGATHER, name, outputs[0], inputs);
  at::Tensor flat = staging(work, size_ * in.numel(), in);
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  unpack_into(back, outputs[0], flat, 0);
  work->copy_back_after(std::move(back));
  submit(work, [send, flat, type](cclComm_t comm, cclStream_t stream) {
    return cclAllGather(send.data_ptr(), flat.data_ptr(), send.numel(), type, comm, stream);
  });
  return work;
}

WorkPtr BackendCcl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                    const c10d::AllgatherOptions&) {
  const char* name = "_allgather_base";
  const cclDataType_t type = datatype_of(name, input);
  check_tensor(name, output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ccl ", name, ": output ",
              describe(output), " and input ", describe(input), " differ in dtype");
  TORCH_CHECK(output.numel() == size_ * input.numel(), "ccl ", name, ": the output has ",
              output.numel(), " elements, not world size x input (", size_, " x ", input.numel(),
              ")");
  at::Tensor send = input.contiguous();
  Staged s = stage_inout(output);
  auto work = new_work(OpType::_ALLGATHER_BASE, name, {output}, {input});
  work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  submit(work, [send, buf, type](cclComm_t comm, cclStream_t stream) {
    return cclAllGather(send.data_ptr(), buf.data_ptr(), send.numel(), type, comm, stream);
  });
  return work;
}

WorkPtr BackendCcl::allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::AllgatherOptions&) {
  const char* name = "allgather_coalesced";
  TORCH_CHECK(!inputs.empty(), "ccl ", name, ": no input tensors");
  check_dtypes(name, inputs, inputs[0]);
  const cclDataType_t type = datatype_of(name, inputs[0]);
  TORCH_CHECK(static_cast<int>(output_lists.size()) == size_, "ccl ", name, ": ",
              output_lists.size(), " output lists for ", size_, " ranks");
  std::vector<at::Tensor> all_outputs;
  for (size_t r = 0; r < output_lists.size(); ++r) {
    TORCH_CHECK(output_lists[r].size() == inputs.size(), "ccl ", name, ": output list ", r, " has ",
                output_lists[r].size(), " tensors, the input list ", inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_same_shape(name, {output_lists[r][i]}, inputs[i]);
      all_outputs.push_back(output_lists[r][i]);
    }
  }
  auto work = new_work(OpType::ALLGATHER_COALESCED, name, all_outputs, inputs);
  at::Tensor send = pack_into(staging(work, element_count(inputs), inputs[0]), inputs);
  at::Tensor flat = staging(work, size_ * send.numel(), inputs[0]);
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  unpack_into(back, all_outputs, flat, 0);
  work->copy_back_after(std::move(back));
  submit(work, [send, flat, type](cclComm_t comm, cclStream_t stream) {
    return cclAllGather(send.data_ptr(), flat.data_ptr(), send.numel(), type, comm, stream);
  });
  return work;
}

WorkPtr BackendCcl::gather(std::vector<std::vector<at::Tensor>>& outputs,
                           std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const char* name = "gather";
  const at::Tensor& in = single_tensor(name, inputs);
  const cclDataType_t type = datatype_of(name, in);
  check_rank(name, "root", opts.rootRank);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor send = in.contiguous();
  if (rank_ != root) {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), "ccl ", name,
                ": only the root (rank ", root, ") takes output tensors");
    auto work = new_work(OpType::GATHER, name, {}, inputs);
    submit(work, [send, type, root](cclComm_t comm, cclStream_t stream) {
      return cclSend(send.data_ptr(), send.numel(), type, root, comm, stream);
    });
    return work;
  }
  TORCH_CHECK(outputs.size() == 1, "ccl ", name, ": takes one output list at the root, got ",
              outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "ccl ", name, ": ", outputs[0].size(),
              " output tensors for ", size_, " ranks");
  check_same_shape(name, outputs[0], in);
  auto work = new_work(OpType::GATHER, name, outputs[0], inputs);
  at::Tensor flat = staging(work, size_ * in.numel(), in);
  flat.narrow(0, root * in.numel(), in.numel()).copy_(send.reshape({-1}));
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  unpack_into(back, outputs[0], flat, 0);
  work->copy_back_after(std::move(back));
  submit(work, root_exchange(flat, type, root, size_, /*receive=*/true));
  return work;
}

WorkPtr BackendCcl::scatter(std::vector<at::Tensor>& outputs,
                            std::vector<std::vector<at::Tensor>>& inputs,
                            const c10d::ScatterOptions& opts) {
  const char* name = "scatter";
  const at::Tensor& out = single_tensor(name, outputs);
  const cclDataType_t type = datatype_of(name, out);
  check_rank(name, "root", opts.rootRank);
  const int root = static_cast<int>(opts.rootRank);
  Staged s = stage_inout(out);
  // The root's span carries what it scatters; the others', what they receive.
  auto work = new_work(OpType::SCATTER, name, outputs,
                       rank_ == root && inputs.size() == 1 ? inputs[0] : outputs);
  work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  if (rank_ != root) {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), "ccl ", name,
                ": only the root (rank ", root, ") takes input tensors");
    submit(work, [buf, type, root](cclComm_t comm, cclStream_t stream) {
      return cclRecv(buf.data_ptr(), buf.numel(), type, root, comm, stream);
    });
    return work;
  }
  TORCH_CHECK(inputs.size() == 1, "ccl ", name, ": takes one input list at the root, got ",
              inputs.size());
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == size_, "ccl ", name, ": ", inputs[0].size(),
              " input tensors for ", size_, " ranks");
  check_same_shape(name, inputs[0], out);
  at::Tensor flat = pack_into(staging(work, element_count(inputs[0]), out), inputs[0]);
  buf.view({-1}).copy_(flat.narrow(0, root * out.numel(), out.numel()));
  submit(work, root_exchange(flat, type, root, size_, /*receive=*/false));
  return work;
}

WorkPtr BackendCcl::reduce_scatter(std::vector<at::Tensor>& outputs,
                                   std::vector<std::vector<at::Tensor>>& inputs,
                                   const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter";
  const at::Tensor& out = single_tensor(name, outputs);
  const cclDataType_t type = datatype_of(name, out);
  const Reduction reduction = reduction_of(name, opts.reduceOp, out);
  TORCH_CHECK(inputs.size() == 1, "ccl ", name, ": takes one input list per process, got ",
              inputs.size());
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == size_, "ccl ", name, ": ", inputs[0].size(),
              " input tensors for ", size_, " ranks");
  check_same_shape(name, inputs[0], out);
  auto work = new_work(OpType::REDUCE_SCATTER, name, {out}, inputs[0]);
  at::Tensor send = pack_into(staging(work, element_count(inputs[0]), out), inputs[0]);
  return reduce_scatter_from(work, send, out, reduction, type);
}

c10::intrusive_ptr<WorkCcl> BackendCcl::reduce_scatter_from(const c10::intrusive_ptr<WorkCcl>& work,
                                                            const at::Tensor& send,
                                                            const at::Tensor& output,
                                                            const Reduction& reduction,
                                                            cclDataType_t type) {
  Staged s = stage_inout(output);
  work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  submit_reduction(work, reduction, type,
                   [send, buf, type](cclComm_t comm, cclStream_t stream, cclRedOp_t op) {
                     return cclReduceScatter(send.data_ptr(), buf.data_ptr(), buf.numel(), type, op,
                                             comm, stream);
                   });
  return work;
}

WorkPtr BackendCcl::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                         const c10d::ReduceScatterOptions& opts) {
  const char* name = "_reduce_scatter_base";
  const cclDataType_t type = datatype_of(name, input);
  check_tensor(name, output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ccl ", name, ": output ",
              describe(output), " and input ", describe(input), " differ in dtype");
  TORCH_CHECK(input.numel() == size_ * output.numel(), "ccl ", name, ": the input has ",
              input.numel(), " elements, not world size x output (", size_, " x ", output.numel(),
              ")");
  const Reduction reduction = reduction_of(name, opts.reduceOp, input);
  return reduce_scatter_from(new_work(OpType::_REDUCE_SCATTER_BASE, name, {output}, {input}),
                             input.contiguous(), output, reduction, type);
}

// The coalesced forms (FSDP's): every input packed into one buffer, so the pieces go as one
// collective. allgather: the buffer laid [input 0, input 1, ...] per rank; each output i takes
// rank r's piece i. reduce-scatter: the buffer laid per destination rank r as [input 0's part r,
// input 1's part r, ...], so the result is [output 0, output 1, ...].
namespace {

void check_coalesced(const char* op, const std::vector<at::Tensor>& outputs,
                     const std::vector<at::Tensor>& inputs, int size, bool gather) {
  TORCH_CHECK_VALUE(!inputs.empty() && inputs.size() == outputs.size(), "ccl ", op, ": ",
                    inputs.size(), " inputs and ", outputs.size(),
                    " outputs (one output per input)");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(op, inputs[i]);
    check_tensor(op, outputs[i]);
    TORCH_CHECK_VALUE(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                          outputs[i].scalar_type() == inputs[0].scalar_type(),
                      "ccl ", op, ": tensor pair ", i, " (", describe(inputs[i]), ", ",
                      describe(outputs[i]), ") differs in dtype from ", describe(inputs[0]));
    const int64_t small = gather ? inputs[i].numel() : outputs[i].numel();
    const int64_t large = gather ? outputs[i].numel() : inputs[i].numel();
    TORCH_CHECK_VALUE(large == size * small, "ccl ", op, ": pair ", i, ": the ",
                      gather ? "output" : "input", " has ", large, " elements, not world size x ",
                      gather ? "input" : "output", " (", size, " x ", small, ")");
  }
}

}  // namespace

WorkPtr BackendCcl::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                    std::vector<at::Tensor>& inputs,
                                                    const c10d::AllgatherOptions&) {
  const char* name = "allgather_into_tensor_coalesced";
  check_coalesced(name, outputs, inputs, size_, /*gather=*/true);
  const cclDataType_t type = datatype_of(name, inputs[0]);
  auto work = new_work(kAllgatherIntoTensorCoalesced, name, outputs, inputs);
  const int64_t total = element_count(inputs);
  at::Tensor send = pack_into(staging(work, total, inputs[0]), inputs);
  at::Tensor flat = staging(work, size_ * total, inputs[0]);
  // A non-contiguous output receives through a contiguous copy (stage_inout), in that order.
  std::vector<Staged> staged;
  for (auto& out : outputs) staged.push_back(stage_inout(out));
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  for (int r = 0; r < size_; ++r) {
    int64_t at = r * total;
    for (auto& s : staged) {
      const int64_t n = s.buffer.numel() / size_;
      back.emplace_back(s.buffer.view({-1}).narrow(0, r * n, n), flat.narrow(0, at, n));
      at += n;
    }
  }
  for (auto& s : staged) back.insert(back.end(), s.copy_back.begin(), s.copy_back.end());
  work->copy_back_after(std::move(back));
  submit(work, [send, flat, type](cclComm_t comm, cclStream_t stream) {
    return cclAllGather(send.data_ptr(), flat.data_ptr(), send.numel(), type, comm, stream);
  });
  return work;
}

WorkPtr BackendCcl::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                    std::vector<at::Tensor>& inputs,
                                                    const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  check_coalesced(name, outputs, inputs, size_, /*gather=*/false);
  const cclDataType_t type = datatype_of(name, inputs[0]);
  const Reduction reduction = reduction_of(name, opts.reduceOp, inputs[0]);
  auto work = new_work(kReduceScatterTensorCoalesced, name, outputs, inputs);
  const int64_t total = element_count(outputs);
  at::Tensor send = staging(work, size_ * total, inputs[0]);
  for (int r = 0; r < size_; ++r) {
    int64_t at = r * total;
    for (auto& in : inputs) {
      const int64_t n = in.numel() / size_;
      send.narrow(0, at, n).copy_(in.reshape({-1}).narrow(0, r * n, n));
      at += n;
    }
  }
  at::Tensor flat = staging(work, total, inputs[0]);
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  unpack_into(back, outputs, flat, 0);
  work->copy_back_after(std::move(back));
  submit_reduction(work, reduction, type,
                   [send, flat, type](cclComm_t comm, cclStream_t stream, cclRedOp_t op) {
                     return cclReduceScatter(send.data_ptr(), flat.data_ptr(), flat.numel(), type,
                                             op, comm, stream);
                   });
  return work;
}

WorkPtr BackendCcl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                  std::vector<int64_t>& output_splits,
                                  std::vector<int64_t>& input_splits,
                                  const c10d::AllToAllOptions&) {
  const char* name = "alltoall_base";
  const cclDataType_t type = datatype_of(name, input);
  check_tensor(name, output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ccl ", name, ": output ",
              describe(output), " and input ", describe(input), " differ in dtype");
  at::Tensor send = input.contiguous();
  Staged s = stage_inout(output);
  auto work = new_work(OpType::ALLTOALL_BASE, name, {output}, {input});
  work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(input.numel() == output.numel(), "ccl ", name, ": input (", input.numel(),
                " elements) and output (", output.numel(), ") differ without split sizes");
    TORCH_CHECK(input.numel() % size_ == 0, "ccl ", name, ": ", input.numel(),
                " elements do not split evenly over ", size_, " ranks");
    const size_t count = static_cast<size_t>(input.numel() / size_);
    submit(work, [send, buf, type, count](cclComm_t comm, cclStream_t stream) {
      return cclAlltoAll(send.data_ptr(), buf.data_ptr(), count, type, comm, stream);
    });
    return work;
  }
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  alltoall_layout(name, "input", input, size_, input_splits, send_counts, send_displs);
  alltoall_layout(name, "output", output, size_, output_splits, recv_counts, recv_displs);
  submit(work, [=](cclComm_t comm, cclStream_t stream) {
    return cclAlltoAllV(send.data_ptr(), send_counts.data(), send_displs.data(), buf.data_ptr(),
                        recv_counts.data(), recv_displs.data(), type, comm, stream);
  });
  return work;
}

WorkPtr BackendCcl::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                             const c10d::AllToAllOptions&) {
  const char* name = "alltoall";
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "ccl ", name, ": ", inputs.size(), " input and ", outputs.size(),
              " output tensors for ", size_, " ranks");
  check_dtypes(name, inputs, inputs[0]);
  check_dtypes(name, outputs, inputs[0]);
  const cclDataType_t type = datatype_of(name, inputs[0]);
  auto work = new_work(OpType::ALLTOALL, name, outputs, inputs);
  at::Tensor send = pack_into(staging(work, element_count(inputs), inputs[0]), inputs);
  at::Tensor flat = staging(work, element_count(outputs), inputs[0]);
  std::vector<size_t> send_counts(size_), send_displs(size_), recv_counts(size_),
      recv_displs(size_);
  size_t so = 0, ro = 0;
  for (int r = 0; r < size_; ++r) {
    send_counts[r] = static_cast<size_t>(inputs[r].numel());
    send_displs[r] = so;
    so += send_counts[r];
    recv_counts[r] = static_cast<size_t>(outputs[r].numel());
    recv_displs[r] = ro;
    ro += recv_counts[r];
  }
  std::vector<std::pair<at::Tensor, at::Tensor>> back;
  unpack_into(back, outputs, flat, 0);
  work->copy_back_after(std::move(back));
  submit(work, [=](cclComm_t comm, cclStream_t stream) {
    return cclAlltoAllV(send.data_ptr(), send_counts.data(), send_displs.data(), flat.data_ptr(),
                        recv_counts.data(), recv_displs.data(), type, comm, stream);
  });
  return work;
}

// torch's tag is not matched: ccl matches a pair's messages in the order they were posted.
WorkPtr BackendCcl::send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) {
  const char* name = "send";
  const at::Tensor& t = single_tensor(name, tensors);
  const cclDataType_t type = datatype_of(name, t);
  check_rank(name, "destination", dst);
  at::Tensor buf = t.contiguous();
  auto work = new_work(OpType::SEND, name, tensors, tensors);
  submit_p2p(work, [buf, type, dst](cclComm_t comm, cclStream_t stream) {
    return cclSend(buf.data_ptr(), buf.numel(), type, dst, comm, stream);
  });
  return work;
}

WorkPtr BackendCcl::recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) {
  const char* name = "recv";
  const at::Tensor& t = single_tensor(name, tensors);
  const cclDataType_t type = datatype_of(name, t);
  check_rank(name, "source", src);
  Staged s = stage_inout(t);
  auto work = new_work(OpType::RECV, name, tensors, tensors);
  work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  submit_p2p(work, [buf, type, src](cclComm_t comm, cclStream_t stream) {
    return cclRecv(buf.data_ptr(), buf.numel(), type, src, comm, stream);
  });
  return work;
}

// cclRecvAnySource, launched as any operation is (after the pending batch): it waits for the
// group's queued operations, then for the first peer whose message begins to arrive, and
// receives it. So the call returns once the message is in (irecv without src is a blocking
// recv; Gloo's returns at once), and the work's _source_rank() names the sender.
WorkPtr BackendCcl::recvAnysource(std::vector<at::Tensor>& tensors, int /*tag*/) {
  const char* name = "recv";
  const at::Tensor& t = single_tensor(name, tensors);
  const cclDataType_t type = datatype_of(name, t);
  // The host waits for the message to learn its source: no place for it on a CUDA stream.
  TORCH_CHECK_VALUE(!t.is_cuda(), "ccl ", name, ": a receive from any source (no src) takes a CPU ",
                    "tensor, not ", describe(t), "; name the source rank");
  Staged s = stage_inout(t);
  auto work = new_work(OpType::RECVANYSOURCE, "recv from any source", tensors, tensors);
  work->copy_back_after(std::move(s.copy_back));
  at::Tensor buf = s.buffer;
  WorkCcl* w = work.get();  // the launch is the work's own, dropped when it completes
  const WithoutGil no_gil;  // the wait may take the communicator's whole timeout
  submit(work, [buf, type, w](cclComm_t comm, cclStream_t stream) {
    int source = -1;
    const cclResult_t r =
        cclRecvAnySource(buf.data_ptr(), buf.numel(), type, &source, comm, stream);
    w->set_source_rank(source);
    return r;
  });
  return work;
}

WorkPtr BackendCcl::barrier(const c10d::BarrierOptions& opts) {
  // A group with CUDA work: the barrier comes after it, as NCCL's (whose barrier is an allreduce
  // on the device that the host then waits for); then the ranks meet on the host.
  std::shared_ptr<CudaLane> cuda;
  {
    std::lock_guard<std::mutex> lock(cuda_mutex_);
    cuda = cuda_;
  }
  if (cuda) cuda->drain("barrier");
  auto work = new_work(OpType::BARRIER, "barrier", {}, {});
  // A call's own timeout bounds its wait (the barrier stays queued: a late rank still meets it).
  if (opts.timeout != c10d::kUnsetTimeout && opts.timeout.count() > 0) {
    work->set_wait_timeout(opts.timeout);
  }
  submit(work, [](cclComm_t comm, cclStream_t stream) { return cclBarrier(comm, stream); });
  return work;
}

void BackendCcl::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  // Blocking, so a scoped span (no work to carry one); nothing while no profiler listens.
  RECORD_USER_SCOPE("ccl:monitored_barrier");
  using Clock = std::chrono::steady_clock;
  const std::chrono::milliseconds timeout =
      opts.timeout == c10d::kUnsetTimeout ? timeout_.load() : opts.timeout;
  TORCH_CHECK_VALUE(timeout.count() >= 0,
                    "ccl monitored_barrier: the timeout must not be "
                    "negative (",
                    timeout.count(), " ms)");
  TORCH_CHECK(store_, "ccl monitored_barrier: this group was made by shrink or grow and has no ",
              "store to check in through");
  const Clock::time_point deadline = Clock::now() + timeout;
  const auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  };
  const std::string round = "ccl_monitored_barrier/" + std::to_string(++monitored_rounds_) + "/";
  const std::string released = round + "released";
  // The waits below may take the whole timeout.
  const WithoutGil no_gil;
  if (rank_ != 0) {
    store_->set(round + std::to_string(rank_), std::vector<uint8_t>{1});
    try {
      if (left().count() <= 0) throw std::runtime_error("no time left");
      store_->wait({released}, left());
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "Rank ", rank_,
                  " successfully reached monitoredBarrier, but received errors while waiting "
                  "for send/recv from rank 0. Please check rank 0 logs for faulty rank. (",
                  e.what(), ")");
    }
    return;
  }
  std::vector<int> late;
  bool out_of_time = false;  // the deadline passed before a late rank could be waited for
  for (int r = 1; r < size_ && (wait_all_ranks || late.empty()); ++r) {
    const std::string key = round + std::to_string(r);
    bool arrived = false;
    try {
      // Past the deadline, the ranks still unchecked are only looked up.
      if (left().count() > 0) {
        store_->wait({key}, left());
        arrived = true;
      } else {
        arrived = store_->check({key});
        out_of_time = out_of_time || (!arrived && late.empty());
      }
    } catch (const std::exception&) {
      arrived = false;  // the store's timeout
    }
    if (!arrived) late.push_back(r);
  }
  // As Gloo words it: rank 0 ran out of its time before it could wait for anyone late (a
  // timeout of 0, or one the earlier ranks used up).
  TORCH_CHECK(!out_of_time || wait_all_ranks, "Rank 0 timed out in monitoredBarrier after ",
              timeout.count(), " ms");
  if (!late.empty()) {
    std::string ranks;
    for (int r : late) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    TORCH_CHECK(false, late.size() == 1 ? "Rank " : "Ranks ", ranks,
                " failed to pass monitoredBarrier in ", timeout.count(), " ms");
  }
  store_->set(released, std::vector<uint8_t>{1});
  // Every rank is past the previous round's release: its keys can go (a store without
  // deleteKey keeps them, a few bytes each).
  try {
    for (int r = 1; r < size_; ++r) store_->deleteKey(round + std::to_string(r));
    if (monitored_rounds_ > 1) {
      store_->deleteKey("ccl_monitored_barrier/" + std::to_string(monitored_rounds_ - 1) +
                        "/released");
    }
  } catch (const std::exception&) {
  }
}

}  // namespace ccl_torch
