// device_collectives_check: every collective x datatype x op with CUDA device buffers on CUDA
// streams (cclStreamFromCuda), at N ranks on one GPU (N processes sharing device 0, which ccl
// allows), each result compared byte for byte with the same call on host buffers on the same
// communicator: the device path must give exactly what the host path gives.
//
//   device_collectives_check [--ranks N] [--count C]     (N 1..8, default 2; C default 1031)
//
// Prints "device_collectives_check: N ranks: K calls identical to the host path" and exits 0;
// 1 on a difference or a failure (naming the call); 77 without a CUDA device ("SKIP: ...").
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/reduce/reduce.h"
#include "ccl/ccl.h"

namespace {

constexpr cclRedOp_t kOps[] = {cclSum, cclProd, cclMax, cclMin, cclAvg};

// A value for element i of rank r, exact in every datatype (small integers).
double seed_value(int rank, size_t i) { return static_cast<double>((rank * 7 + i) % 5) - 2.0; }

void encode(cclDataType_t t, double v, void* out) {
  using namespace ccl::reduce;
  switch (t) {
    case cclInt8:
      *static_cast<int8_t*>(out) = static_cast<int8_t>(v);
      break;
    case cclUint8:
      *static_cast<uint8_t*>(out) = static_cast<uint8_t>(v + 2);
      break;
    case cclInt32:
      *static_cast<int32_t*>(out) = static_cast<int32_t>(v);
      break;
    case cclUint32:
      *static_cast<uint32_t*>(out) = static_cast<uint32_t>(v + 2);
      break;
    case cclInt64:
      *static_cast<int64_t*>(out) = static_cast<int64_t>(v);
      break;
    case cclUint64:
      *static_cast<uint64_t*>(out) = static_cast<uint64_t>(v + 2);
      break;
    case cclFloat16:
      *static_cast<uint16_t*>(out) = float_to_half(static_cast<float>(v));
      break;
    case cclFloat32:
      *static_cast<float*>(out) = static_cast<float>(v);
      break;
    case cclFloat64:
      *static_cast<double*>(out) = v;
      break;
    case cclBfloat16:
      *static_cast<uint16_t*>(out) = float_to_bf16(static_cast<float>(v));
      break;
    case cclFloat8e4m3:
      *static_cast<uint8_t*>(out) = float_to_fp8e4m3(static_cast<float>(v));
      break;
    case cclFloat8e5m2:
      *static_cast<uint8_t*>(out) = float_to_fp8e5m2(static_cast<float>(v));
      break;
    default:
      break;
  }
}

std::vector<char> inputs(cclDataType_t t, int rank, size_t count) {
  const size_t size = ccl::reduce::datatype_size(t);
  std::vector<char> v(count * size);
  for (size_t i = 0; i < count; ++i) encode(t, seed_value(rank, i), v.data() + i * size);
  return v;
}

struct Checker {
  int rank, nranks;
  cclComm_t comm;
  cclStream_t stream;
  cudaStream_t cuda;
  int calls = 0;
  int failures = 0;

  [[nodiscard]] bool ok(cclResult_t r, const std::string& what) {
    if (r == cclSuccess) return true;
    std::fprintf(stderr, "[%d] %s: %s: %s\n", rank, what.c_str(), cclGetErrorString(r),
                 cclGetLastError(comm));
    ++failures;
    return false;
  }

  // Runs `call(send, recv, stream)` on host buffers (NULL stream) and on device buffers (the
  // CUDA stream), then compares the receive buffers.
  template <class Call>
  void both(const std::string& what, const std::vector<char>& send, size_t recv_bytes, Call call) {
    std::vector<char> host_recv(recv_bytes, 0x5a);
    if (!ok(call(send.data(), host_recv.data(), nullptr), what + " (host)")) return;
    void* d_send = nullptr;
    void* d_recv = nullptr;
    cudaMalloc(&d_send, send.size() + 1);
    cudaMalloc(&d_recv, recv_bytes + 1);
    cudaMemcpyAsync(d_send, send.data(), send.size(), cudaMemcpyHostToDevice, cuda);
    cudaMemsetAsync(d_recv, 0x5a, recv_bytes, cuda);
    std::vector<char> device_recv(recv_bytes);
    if (ok(call(d_send, d_recv, stream), what + " (device)")) {
      cudaMemcpyAsync(device_recv.data(), d_recv, recv_bytes, cudaMemcpyDeviceToHost, cuda);
      cudaStreamSynchronize(cuda);
      if (ok(cclStreamSynchronize(stream), what + " (device, stream)") &&
          std::memcmp(device_recv.data(), host_recv.data(), recv_bytes) != 0) {
        std::fprintf(stderr, "[%d] %s: the device result differs from the host one\n", rank,
                     what.c_str());
        ++failures;
      }
    }
    cudaFree(d_send);
    cudaFree(d_recv);
    ++calls;
  }

  void run(size_t count) {
    for (int t = 0; t < cclNumTypes; ++t) {
      const auto type = static_cast<cclDataType_t>(t);
      const size_t size = ccl::reduce::datatype_size(type);
      const std::string tn = ccl::reduce::datatype_name(type);
      const std::vector<char> in = inputs(type, rank, count);
      const std::vector<char> in_all = inputs(type, rank, count * nranks);
      for (cclRedOp_t op : kOps) {
        const std::string on = tn + " " + ccl::reduce::op_name(op);
        both("allreduce " + on, in, count * size, [&](const void* s, void* r, cclStream_t st) {
          return cclAllReduce(s, r, count, type, op, comm, st);
        });
        both("reduce " + on, in, count * size, [&](const void* s, void* r, cclStream_t st) {
          return cclReduce(s, r, count, type, op, 0, comm, st);
        });
        both("reducescatter " + on, in_all, count * size,
             [&](const void* s, void* r, cclStream_t st) {
               return cclReduceScatter(s, r, count, type, op, comm, st);
             });
      }
      both("broadcast " + tn, in, count * size, [&](const void* s, void* r, cclStream_t st) {
        return cclBroadcast(s, r, count, type, nranks - 1, comm, st);
      });
      both("allgather " + tn, in, count * size * nranks,
           [&](const void* s, void* r, cclStream_t st) {
             return cclAllGather(s, r, count, type, comm, st);
           });
      both("alltoall " + tn, in_all, count * size * nranks,
           [&](const void* s, void* r, cclStream_t st) {
             return cclAlltoAll(s, r, count, type, comm, st);
           });
      both("send/recv ring " + tn, in, count * size, [&](const void* s, void* r, cclStream_t st) {
        cclGroupStart();
        cclSend(s, count, type, (rank + 1) % nranks, comm, st);
        cclRecv(r, count, type, (rank + nranks - 1) % nranks, comm, st);
        return cclGroupEnd();
      });
    }
  }
};

int run_rank(int rank, int nranks, const cclUniqueId& id, size_t count) {
  if (cudaSetDevice(0) != cudaSuccess) return 77;
  cclComm_t comm = nullptr;
  if (cclCommInitRank(&comm, nranks, id, rank) != cclSuccess) {
    std::fprintf(stderr, "[%d] cclCommInitRank: %s\n", rank, cclGetLastError(nullptr));
    return 1;
  }
  cudaStream_t cuda = nullptr;
  cudaStreamCreate(&cuda);
  cclStream_t stream = nullptr;
  if (cclStreamFromCuda(cuda, &stream) != cclSuccess) {
    std::fprintf(stderr, "[%d] cclStreamFromCuda: %s\n", rank, cclGetLastError(nullptr));
    return 1;
  }
  Checker c{rank, nranks, comm, stream, cuda};
  c.run(count);
  cclStreamDestroy(stream);
  cudaStreamDestroy(cuda);
  cclCommDestroy(comm);
  if (rank == 0 && c.failures == 0) {
    std::printf("device_collectives_check: %d ranks: %d calls identical to the host path\n", nranks,
                c.calls);
  }
  return c.failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 2;
  size_t count = 1031;  // odd: no size is a multiple of anything
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) nranks = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--count") == 0) count = std::strtoull(argv[i + 1], nullptr, 10);
  }
  if (nranks < 1 || nranks > 8 || count == 0) {
    std::fprintf(stderr, "usage: %s [--ranks 1..8] [--count C>0]\n", argv[0]);
    return 2;
  }
  int devices = 0;
  // Asked in a child: a parent that touched CUDA could not fork usable children.
  const pid_t probe = fork();
  if (probe == 0) _exit(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 ? 0 : 77);
  int status = 0;
  waitpid(probe, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  cclUniqueId id;
  if (cclGetUniqueId(&id) != cclSuccess) return 1;
  std::vector<pid_t> children;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(300);  // bounded, whatever happens
      _exit(run_rank(r, nranks, id, count));
    }
    children.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : children) {
    waitpid(pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (code != 0 && (worst == 0 || worst == 77)) worst = code;
  }
  if (worst != 0) std::printf("device_collectives_check: %d ranks: FAILED\n", nranks);
  return worst;
}
