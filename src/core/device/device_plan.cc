#include "core/device/device_plan.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "base/log.h"

namespace ccl {

namespace dev = algo::device;

namespace {

// Microseconds of one allreduce of `bytes` by `ops` stream operations moving `local` bytes
// through the rank's own GPU memory and `remote` bytes read from peers.
double cost(const DeviceLinks& links, int nranks, bool one_device, double ops, double local,
            double remote) {
  const double latency = ops * links.op_latency_us;
  if (one_device) return latency + nranks * (local + remote) / (links.memory_gbps * 1e3);
  return latency + std::max(local / (links.memory_gbps * 1e3), remote / (links.peer_gbps * 1e3));
}

}  // namespace

DeviceLinks DeviceLinks::of(cuda::PeerLink link) {
  DeviceLinks links;
  if (link == cuda::PeerLink::Pcie) links.peer_gbps = 25.0;
  return links;
}

dev::AllReduceAlgorithm choose_all_reduce(uint64_t bytes, int nranks, bool one_device,
                                          const DeviceLinks& links,
                                          const tune::Selection& selection) {
  using tune::Collective;
  using tune::Protocol;
  const bool one_ok = selection.allows(Collective::AllReduce, Protocol::LL);
  const bool two_ok = selection.allows(Collective::AllReduce, Protocol::Simple);
  if (one_ok != two_ok) {
    return one_ok ? dev::AllReduceAlgorithm::OneShot : dev::AllReduceAlgorithm::TwoShot;
  }
  const double s = static_cast<double>(bytes), n = nranks;
  // Operations as the executor queues them (a batch of flags is one; an n-way reduction n - 1
  // launches; a gather n copies). Local: the copy in (read + write), the own share of the
  // reduction and the writes; remote: what is read from the peers.
  const double one = cost(links, nranks, one_device, n + 3, 4 * s, (n - 1) * s);
  const double two =
      cost(links, nranks, one_device, 2 * n + 4, 3 * s + 3 * s / n, 2 * (n - 1) / n * s);
  return two < one ? dev::AllReduceAlgorithm::TwoShot : dev::AllReduceAlgorithm::OneShot;
}

DevicePlan plan_device(const Call& call, const DeviceWorld& world, const ReductionOps& ops,
                       const tune::Selection& selection) {
  using Kind = OpKind;
  DevicePlan plan;
  DeviceBindings& b = plan.bindings;
  b.input = call.sendbuff;
  b.output = call.recvbuff;
  b.slots = call.buffers();
  b.type = call.type;
  const bool sendrecv = call.kind == Kind::SendRecv || call.kind == Kind::Barrier;
  const size_t elem = sendrecv ? 1 : reduce::datatype_size(call.type);
  const dev::Shape shape = world.shape(elem);
  const int n = shape.nranks, r = shape.rank;
  const auto* base = static_cast<const std::byte*>(call.recvbuff);
  const auto* in = static_cast<const std::byte*>(call.sendbuff);

  dev::Reduction red;
  const bool reducing =
      call.kind == Kind::AllReduce || call.kind == Kind::Reduce || call.kind == Kind::ReduceScatter;
  if (reducing) {
    const Reduction resolved = ops.resolve(call.op, call.type, n);
    red.average = call.op == cclAvg;
    red.scale_input = resolved.scale != nullptr;
    b.op = call.op < cclNumOps && call.op != cclAvg ? call.op : cclSum;
    if (red.scale_input) std::memcpy(&b.scalar_bits, resolved.scalar.data(), elem);
    if (reduce::cuda::reduce_kernel_name(call.type, b.op) == nullptr) {
      throw_error(cclInvalidArgument, "%s: no CUDA kernel reduces this datatype by this op",
                  call.function);
    }
  }

  switch (call.kind) {
    case Kind::AllReduce: {
      const auto algo = choose_all_reduce(call.count * elem, n, world.one_device(),
                                          DeviceLinks::of(world.link()), selection);
      plan.algorithm = algo == dev::AllReduceAlgorithm::OneShot ? "one-shot" : "two-shot";
      plan.program = dev::all_reduce(shape, call.count, algo, red);
      break;
    }
    case Kind::Broadcast:
      plan.program = dev::broadcast(shape, call.count, call.root, call.sendbuff == call.recvbuff);
      break;
    case Kind::Reduce:
      plan.program = dev::reduce(shape, call.count, call.root, red);
      break;
    case Kind::AllGather:
      plan.program =
          dev::all_gather(shape, call.count, in != nullptr && in == base + r * call.count * elem);
      break;
    case Kind::AllGatherV:
      plan.program = dev::all_gather_v(shape, call.counts(), call.displs(),
                                       in != nullptr && in == base + call.displs()[r] * elem);
      break;
    case Kind::ReduceScatter:
      plan.program = dev::reduce_scatter(shape, call.count, red);
      break;
    case Kind::AlltoAll:
      plan.program = dev::all_to_all(shape, call.count, in != nullptr && in == base);
      break;
    case Kind::AlltoAllV:
      plan.program = dev::all_to_all_v(shape, call.counts(), call.displs(), call.recvcounts(),
                                       call.rdispls(), in != nullptr && in == base);
      break;
    case Kind::SendRecv: {
      // Sends to this rank itself pair with its receives from itself, in order, of equal sizes
      // (as the host path's schedule requires).
      std::vector<size_t> to_self, from_self;
      for (const algo::PointToPoint& p : call.p2p()) {
        if (p.peer == r && p.bytes > 0) (p.send ? to_self : from_self).push_back(p.bytes);
      }
      if (to_self != from_self) {
        throw_error(cclInvalidUsage,
                    "%s: the group's sends to this rank itself and its receives from itself do "
                    "not pair up with equal sizes",
                    call.function);
      }
      plan.program = dev::point_to_point(shape, call.p2p());
      break;
    }
    case Kind::Barrier:
      plan.program = dev::barrier(shape);
      break;
  }
  CCL_TRACE(kColl, "%s on the device: %s, %zu operations", call.function, plan.algorithm,
            plan.program.ops().size());
  return plan;
}

}  // namespace ccl
