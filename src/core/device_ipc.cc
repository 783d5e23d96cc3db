#include "core/device_ipc.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "base/log.h"
#include "cuda/cuda_driver.h"

namespace ccl {

namespace {

// One rank's offer: its buffers as the peers can open them, and whether it can take the path.
struct Offer {
  cuda::IpcBuffer in;
  cuda::IpcBuffer out;
  cuda::DeviceUuid device;  // of the buffers
  int32_t ok = 0;
  int32_t pad = 0;
};

}  // namespace

bool DeviceIpc::applies(int nhosts, int nranks) const {
  return enabled_ && nhosts == 1 && nranks > 1 && cuda::have_kernels() &&
         cuda::cuda_driver() != nullptr;
}

bool DeviceIpc::devices_reach_each_other(const std::vector<cuda::DeviceUuid>& devices,
                                         const AllGather& all_gather) {
  if (std::all_of(devices.begin(), devices.end(),
                  [&](const cuda::DeviceUuid& d) { return d == devices[0]; })) {
    return true;  // one GPU: every buffer is on the device that reads it
  }
  if (auto known = reachable_.find(devices); known != reachable_.end()) return known->second;
  // Every rank asks its driver about every other device, then all take the answer of the
  // weakest: a pair without P2P (or a device some rank does not see) stages everyone.
  char mine = 1;
  for (const cuda::DeviceUuid& d : devices) mine = mine && cuda::can_access_device(d);
  std::vector<char> answers(devices.size());
  all_gather(&mine, answers.data(), 1);
  const bool all = std::all_of(answers.begin(), answers.end(), [](char a) { return a != 0; });
  if (!all) {
    CCL_INFO(kColl,
             "CUDA IPC allreduce: some rank cannot reach a peer's GPU (no P2P access): these "
             "GPUs' allreduces are staged through the host");
  }
  reachable_.emplace(devices, all);
  return all;
}

bool DeviceIpc::all_reduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                           cclRedOp_t op, int rank, int nranks, const AllGather& all_gather) {
  const size_t elem = reduce::datatype_size(type);
  Offer mine;
  void* context = nullptr;
  std::optional<cuda::ContextScope> scope;
  if (count > 0 && reduce::cuda::reduce_kernel_name(type, op) != nullptr &&
      cuda::pointer_kind(sendbuff) == MemoryKind::CudaDevice &&
      cuda::pointer_kind(recvbuff) == MemoryKind::CudaDevice) {
    context = cuda::context_of(recvbuff);
    // The driver calls below (export, open, launches) need the buffers' context current.
    scope.emplace(context);
    if (cuda::context_of(sendbuff) == context) {
      mine.in = cuda::export_buffer(sendbuff);
      mine.out = cuda::export_buffer(recvbuff);
      mine.ok = mine.in.valid && mine.out.valid;
      mine.device = cuda::current_device_uuid();
    }
  }
  // The inputs are ready before the exchange, which every rank leaves only once every rank has
  // entered it: after it, any rank may read any input.
  if (mine.ok) cuda::order_after_legacy_stream();
  std::vector<Offer> offers(nranks);
  all_gather(&mine, offers.data(), sizeof(Offer));
  if (!std::all_of(offers.begin(), offers.end(), [](const Offer& o) { return o.ok != 0; })) {
    return false;
  }
  std::vector<cuda::DeviceUuid> devices(nranks);
  for (int q = 0; q < nranks; ++q) devices[q] = offers[q].device;
  if (!devices_reach_each_other(devices, all_gather)) return false;

  // Every rank opens its peers' handles before any reads another's buffers, and all stage if
  // one could not (a container without the peers' IPC namespace, a sandbox without CUDA IPC):
  // a rank that threw here would leave the others reading and writing its buffers.
  std::vector<const std::byte*> inputs(nranks);
  std::vector<std::byte*> outputs(nranks);
  char opened = 1;
  try {
    for (int q = 0; q < nranks; ++q) {
      inputs[q] = static_cast<const std::byte*>(imports_.open(offers[q].in, devices[q]));
      outputs[q] = static_cast<std::byte*>(imports_.open(offers[q].out, devices[q]));
    }
  } catch (const Error& e) {
    CCL_WARN(kColl, "CUDA IPC allreduce: %s; staging through the host instead", e.what());
    opened = 0;
  }
  std::vector<char> all_opened(nranks);
  all_gather(&opened, all_opened.data(), 1);
  if (!std::all_of(all_opened.begin(), all_opened.end(), [](char o) { return o != 0; })) {
    // Every rank saw the same answers: all turn the path off for this communicator together.
    CCL_INFO(
        kColl,
        "CUDA IPC allreduce off for this communicator: a rank could not open a peer's buffers");
    enabled_ = false;
    return false;
  }
  // Slice r: elements [lo, hi), the remainder spread over the first ranks.
  const size_t base = count / nranks, extra = count % nranks;
  const size_t lo = rank * base + std::min<size_t>(rank, extra);
  const size_t len = base + (static_cast<size_t>(rank) < extra ? 1 : 0);
  if (len > 0) {
    void* stream = stream_.get(context);
    const size_t at = lo * elem, bytes = len * elem;
    std::byte* dst = outputs[rank] + at;
    bool first = true;
    for (int q = 0; q < nranks; ++q) {
      if (q == rank) continue;
      // Own input first: in place, dst is that input, read element by element as it is written.
      kernels_.reduce(context, stream, dst, first ? inputs[rank] + at : dst, inputs[q] + at, len,
                      type, op);
      first = false;
    }
    if (op == cclAvg) kernels_.divide(context, stream, dst, len, type, nranks);
    for (int q = 0; q < nranks; ++q) {
      if (q != rank) stream_.copy_async(context, outputs[q] + at, dst, bytes);
    }
    stream_.synchronize(context);
  }
  // Every rank's writes into every output are done before any returns.
  const char done = 1;
  std::vector<char> all_done(nranks);
  all_gather(&done, all_done.data(), 1);
  imports_.trim();  // no rank touches a peer's buffer any more
  return true;
}

}  // namespace ccl
