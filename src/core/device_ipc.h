// The device path of allreduce between the ranks of one host: every rank reads its peers'
// device buffers through CUDA IPC (cuda/cuda_ipc.h) and reduces them with ccl's kernels
// (cuda/cuda_kernels.h), so no byte goes through host memory.
//
// Rank r owns slice r of the buffer: it reduces slice r of every input into its own output
// (its own input first, so that an in-place call reads its slice before writing it), then copies
// that slice into every peer's output. Only rank r reads or writes slice r of any buffer, so two
// host synchronisations suffice: an allgather of the buffers' handles once every rank's inputs
// are ready (it is also the agreement: the path is taken only if every rank offered device
// buffers), and one after every rank's writes are done. Ranks on different GPUs take the path
// only if each GPU can read the others' memory (P2P, cuDeviceCanAccessPeer): the first time a
// set of GPUs meets, the ranks exchange what their drivers say, and all stage through the host
// if any pair cannot.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <vector>

#include "ccl/ccl.h"
#include "cuda/cuda_ipc.h"
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_memory.h"

namespace ccl {

class DeviceIpc {
 public:
  // Exchanges `bytes` of every rank's `mine` into `all` (nranks * bytes), through the host path
  // of the communicator (its allgather, under the op mutex the caller holds).
  using AllGather = std::function<void(const void* mine, void* all, size_t bytes)>;

  // `enabled`: CCL_CUDA_IPC, read with the communicator's other settings.
  explicit DeviceIpc(bool enabled) : enabled_(enabled) {}

  // Whether a communicator of these ranks ever takes the path: one host, more than one rank,
  // a CUDA driver, the kernels built, CCL_CUDA_IPC not 0. The same answer on every rank (the
  // driver and the build are the same on one host): those communicators exchange offers on
  // every allreduce, and the others never do.
  bool applies(int nhosts, int nranks) const;

  // The allreduce over IPC, if every rank can take it (device send and receive buffers of one
  // context, an op with a kernel); false when some rank cannot, and then every rank goes the
  // host-staged way. Throws what the driver or the exchange throws.
  bool all_reduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                  cclRedOp_t op, int rank, int nranks, const AllGather& all_gather);

 private:
  // Whether every rank's device can read every other's memory (P2P): the same answer on every
  // rank. Asked of the driver by an exchange of the ranks' answers the first time a set of
  // devices is seen, then remembered (every rank sees the same sets in the same order).
  bool devices_reach_each_other(const std::vector<cuda::DeviceUuid>& devices,
                                const AllGather& all_gather);

  bool enabled_;
  std::map<std::vector<cuda::DeviceUuid>, bool> reachable_;
  cuda::IpcImports imports_;
  cuda::DeviceKernels kernels_;
  cuda::OwnStream stream_;
};

}  // namespace ccl
