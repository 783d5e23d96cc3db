// The device collectives of one host's ranks (core/device/device_world.h) over the fake driver,
// whose streams run later on threads of their own and whose device memory the host cannot
// touch: every collective on device buffers equal byte for byte to the same call on host
// buffers (the host path) at 1 to 8 ranks, on the NULL stream and on CUDA streams (4 datatypes x
// sum, max, avg; the reducing ones for every datatype x op), allreduce's results also against
// values the test computes and decodes itself (docs/cuda.md lists the combinations); calls on a
// CUDA stream that return before the stream runs anything and make no host thread ask the
// driver about a stream; two streams of one communicator; graph capture and replay; a peer that
// never calls, and an abort, that release every stream within the timeout; the world's setup
// declining together.
//
// The ranks are threads of one process on one fake GPU, so they share its legacy stream: their
// CUDA streams are non-blocking. With blocking streams, a rank's NULL-stream call (ordered after
// the legacy stream, and with it after every blocking stream of the context) would wait for a
// peer's blocking stream that waits for this rank: a deadlock on a real GPU too, for ranks
// sharing a context (the fake aborts after 20 s of it).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../support/rank_threads.h"
#include "algorithms/reduce/reduce.h"
#include "ccl/ccl.h"
#include "child_process.h"
#include "core/device/device_plan.h"
#include "cuda/cuda_driver.h"
#include "cuda/cuda_kernels.h"
#include "fake_driver.h"

namespace {

namespace fake = ccl_test::fake_cuda;
using namespace std::chrono_literals;

class DeviceWorld : public testing::Test {
 protected:
  void SetUp() override {
    if (!ccl::cuda::have_kernels()) GTEST_SKIP() << "this build has no CUDA kernels";
    fake::install();
    fake::set_default_context(true);  // rank threads start with a context, as after cudaSetDevice
    setenv("CCL_CUDA_SCRATCH", "64K", 1);  // small halves: many chunks per call
  }
  void TearDown() override {
    unsetenv("CCL_CUDA_SCRATCH");
    fake::set_default_context(false);
    fake::uninstall();
  }
};

// Small values every datatype holds exactly, whose sums and products over 8 ranks too
// (1 and 2: sums up to 16, products powers of two; e5m2 0 and 1), so that any order of
// reduction gives the same bits.
std::vector<std::byte> pattern(cclDataType_t type, size_t count, int rank, int salt) {
  const size_t e = ccl::reduce::datatype_size(type);
  std::vector<std::byte> bytes(count * e);
  const float one = 1.0f, two = 2.0f;
  for (size_t i = 0; i < count; ++i) {
    const bool big = (rank + i + salt) % 3 == 0;
    std::byte* out = bytes.data() + i * e;
    switch (type) {
      case cclFloat32:
        std::memcpy(out, big ? &two : &one, 4);
        break;
      case cclFloat64: {
        const double d = big ? 2.0 : 1.0;
        std::memcpy(out, &d, 8);
        break;
      }
      case cclFloat16: {
        const uint16_t h = big ? 0x4000 : 0x3c00;
        std::memcpy(out, &h, 2);
        break;
      }
      case cclBfloat16: {
        const uint16_t b = big ? 0x4000 : 0x3f80;
        std::memcpy(out, &b, 2);
        break;
      }
      case cclFloat8e4m3:
        out[0] = std::byte(big ? 0x40 : 0x38);
        break;
      case cclFloat8e5m2:  // 2 mantissa bits: 9 is not exact, so 0 and 1 (sums up to 8)
        out[0] = std::byte(big ? 0x3c : 0x00);
        break;
      default: {  // integers: little-endian 1 or 2
        std::memset(out, 0, e);
        out[0] = std::byte(big ? 2 : 1);
        break;
      }
    }
  }
  return bytes;
}

void* to_device(const std::vector<std::byte>& host) {
  void* d = fake::device_alloc(std::max<size_t>(host.size(), 1));
  fake::to_device(d, host.data(), host.size());
  return d;
}

std::vector<std::byte> from_device(const void* d, size_t bytes) {
  std::vector<std::byte> h(bytes);
  fake::from_device(h.data(), d, bytes);
  return h;
}

// An element's value, decoded here from its bits (not by ccl's converters, which the kernels
// under test share): the formats' definitions, for the finite values the tests use.
double decode(cclDataType_t type, const std::byte* p) {
  auto bits = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  // 1.mantissa x 2^(exponent - bias), or 0.mantissa x 2^(1 - bias) when the exponent is 0.
  auto ieee = [](unsigned sign, unsigned exponent, unsigned mantissa, int mantissa_bits, int bias) {
    const double fraction = std::ldexp(mantissa, -mantissa_bits);
    const double magnitude = exponent == 0 ? std::ldexp(fraction, 1 - bias)
                                           : std::ldexp(1.0 + fraction, int(exponent) - bias);
    return sign != 0 ? -magnitude : magnitude;
  };
  switch (type) {
    case cclInt8:
      return bits(int8_t{});
    case cclUint8:
      return bits(uint8_t{});
    case cclInt32:
      return bits(int32_t{});
    case cclUint32:
      return bits(uint32_t{});
    case cclInt64:
      return static_cast<double>(bits(int64_t{}));
    case cclUint64:
      return static_cast<double>(bits(uint64_t{}));
    case cclFloat32:
      return bits(float{});
    case cclFloat64:
      return bits(double{});
    case cclFloat16: {
      const uint16_t h = bits(uint16_t{});
      return ieee(h >> 15, (h >> 10) & 0x1f, h & 0x3ff, 10, 15);
    }
    case cclBfloat16: {
      const uint16_t b = bits(uint16_t{});
      return ieee(b >> 15, (b >> 7) & 0xff, b & 0x7f, 7, 127);
    }
    case cclFloat8e4m3: {
      const auto v = static_cast<unsigned>(bits(uint8_t{}));
      return ieee(v >> 7, (v >> 3) & 0xf, v & 0x7, 3, 7);
    }
    case cclFloat8e5m2: {
      const auto v = static_cast<unsigned>(bits(uint8_t{}));
      return ieee(v >> 7, (v >> 2) & 0x1f, v & 0x3, 2, 15);
    }
    default:
      return std::nan("");
  }
}

// What an allreduce of pattern(type, count, q, salt) over n ranks holds, computed here in double
// from the pattern's rule (a value of 2 or 1; e5m2 1 or 0), and how close an element must be:
// exact for sum, prod, max and min (small integers every type holds), avg within the type's
// rounding.
void expect_allreduced(const std::vector<std::byte>& out, cclDataType_t type, cclRedOp_t op, int n,
                       int salt, const std::string& what) {
  const size_t e = ccl::reduce::datatype_size(type);
  const double big = type == cclFloat8e5m2 ? 1.0 : 2.0, small = type == cclFloat8e5m2 ? 0.0 : 1.0;
  const double tolerance = type == cclFloat8e4m3   ? 0.07
                           : type == cclFloat8e5m2 ? 0.13
                           : type == cclBfloat16   ? 8e-3
                           : type == cclFloat16    ? 1e-3
                           : type == cclFloat32    ? 1e-6
                                                   : 1e-12;
  for (size_t i = 0; i < out.size() / e; ++i) {
    double sum = 0, prod = 1, max = -1e300, min = 1e300;
    for (int q = 0; q < n; ++q) {
      const double v = (q + i + salt) % 3 == 0 ? big : small;
      sum += v;
      prod *= v;
      max = std::max(max, v);
      min = std::min(min, v);
    }
    const double want = op == cclSum    ? sum
                        : op == cclProd ? prod
                        : op == cclMax  ? max
                        : op == cclMin  ? min
                                        : sum / n;
    const double got = decode(type, out.data() + i * e);
    const bool close =
        op == cclAvg ? std::abs(got - want) <= tolerance * std::abs(want) : got == want;
    if (!close) {
      ADD_FAILURE() << what << " type " << type << " op " << op << ": element " << i << " is "
                    << got << ", want " << want << " (computed independently)";
      return;
    }
  }
}

// One collective call, on buffers the caller passes: send and receive sizes in elements.
struct Case {
  std::string name;
  size_t send_elems = 0;
  size_t recv_elems = 0;
  bool in_place = false;  // recv = send (allreduce, broadcast, alltoall)
  std::function<cclResult_t(const void* send, void* recv, cclComm_t, cclStream_t)> call;
};

// Runs `c` on host buffers (the host path), then on device buffers on the NULL stream and on a
// ccl stream of a CUDA stream, and expects the same bytes; `result` (if given) gets them.
void expect_same_as_host(ccl::Communicator& comm, const Case& c, cclDataType_t type, int salt,
                         std::vector<std::byte>* result = nullptr) {
  const int r = comm.rank();
  const size_t e = ccl::reduce::datatype_size(type);
  const std::vector<std::byte> in = pattern(type, c.send_elems, r, salt);
  const std::vector<std::byte> fill(c.recv_elems * e, std::byte{0x5a});

  std::vector<std::byte> host_in = in, host_out = fill;
  if (c.in_place) host_out = in;
  void* host_recv = host_out.data();
  const void* host_send = c.in_place ? host_recv : host_in.data();
  ASSERT_EQ(c.call(host_send, host_recv, comm.get(), nullptr), cclSuccess)
      << c.name << ": " << cclGetLastError(comm.get());
  if (result != nullptr) *result = host_out;

  for (bool on_cuda : {false, true}) {
    void* dsend = to_device(in);
    void* drecv = c.in_place ? dsend : to_device(fill);
    CUstream_st* cuda = nullptr;
    cclStream_t stream = nullptr;
    if (on_cuda) {
      cuda = fake::create_stream(false);
      ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
    }
    ASSERT_EQ(c.call(dsend, drecv, comm.get(), stream), cclSuccess)
        << c.name << (on_cuda ? " on a CUDA stream: " : ": ") << cclGetLastError(comm.get());
    if (on_cuda) {
      ASSERT_EQ(cclStreamSynchronize(stream), cclSuccess) << c.name;
      ASSERT_EQ(cclStreamDestroy(stream), cclSuccess);
      fake::destroy_stream(cuda);
    }
    const std::vector<std::byte> got = from_device(drecv, c.recv_elems * e);
    size_t first = 0;
    while (first < got.size() && got[first] == host_out[first]) ++first;
    size_t differing = 0;
    for (size_t i = 0; i < got.size(); ++i) differing += got[i] != host_out[i];
    float gf = 0, wf = 0;
    if (type == cclFloat32 && first < got.size()) {
      std::memcpy(&gf, got.data() + first / 4 * 4, 4);
      std::memcpy(&wf, host_out.data() + first / 4 * 4, 4);
    }
    EXPECT_EQ(first, got.size()) << c.name << " type " << type << " rank " << r
                                 << (on_cuda ? " (CUDA stream)" : "") << ": byte " << first
                                 << " of " << got.size() << " differs (" << differing
                                 << " bytes differ; got " << gf << " want " << wf << ")";
    fake::device_free(dsend);
    if (!c.in_place) fake::device_free(drecv);
  }
}

std::vector<Case> cases(int n, size_t count, cclRedOp_t op, cclDataType_t type, int r) {
  std::vector<Case> all;
  const size_t e = ccl::reduce::datatype_size(type);
  all.push_back(
      {"allreduce", count, count, false, [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
         return cclAllReduce(s, d, count, type, op, c, st);
       }});
  all.push_back({"allreduce in place", count, count, true,
                 [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
                   return cclAllReduce(s, d, count, type, op, c, st);
                 }});
  all.push_back(
      {"reduce", count, count, false, [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
         return cclReduce(s, d, count, type, op, n - 1, c, st);
       }});
  all.push_back({"reducescatter", count * n, count, false,
                 [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
                   return cclReduceScatter(s, d, count, type, op, c, st);
                 }});
  if (op != cclSum) return all;
  all.push_back(
      {"broadcast", count, count, false, [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
         return cclBroadcast(s, d, count, type, n / 2, c, st);
       }});
  all.push_back({"broadcast in place", count, count, true,
                 [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
                   return cclBroadcast(s, d, count, type, 0, c, st);
                 }});
  all.push_back({"allgather", count, count * n, false,
                 [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
                   return cclAllGather(s, d, count, type, c, st);
                 }});
  all.push_back({"alltoall", count * n, count * n, false,
                 [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
                   return cclAlltoAll(s, d, count, type, c, st);
                 }});
  all.push_back({"alltoall in place", count * n, count * n, true,
                 [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
                   return cclAlltoAll(s, d, count, type, c, st);
                 }});
  // allgatherv: rank q contributes q + count elements, blocks in reverse order.
  std::vector<size_t> counts(n), displs(n);
  size_t total = 0;
  for (int q = n - 1; q >= 0; --q) {
    counts[q] = count + q;
    displs[q] = total;
    total += counts[q];
  }
  all.push_back({"allgatherv", counts[r], total, false,
                 [=](const void* s, void* d, cclComm_t c, cclStream_t st) {
                   return cclAllGatherV(s, counts[r], d, counts.data(), displs.data(), type, c, st);
                 }});
  // alltoallv: rank s sends d (s + 2d) % 3 * count / 2 + d elements.
  auto amount = [count](int s, int d) { return (s + 2 * d) % 3 * count / 2 + d; };
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t st = 0, rt = 0;
  for (int q = 0; q < n; ++q) {
    sc[q] = amount(r, q);
    sd[q] = st;
    st += sc[q];
    rc[q] = amount(q, r);
    rd[q] = rt;
    rt += rc[q];
  }
  all.push_back(
      {"alltoallv", st, rt, false, [=](const void* s, void* d, cclComm_t c, cclStream_t stream) {
         return cclAlltoAllV(s, sc.data(), sd.data(), d, rc.data(), rd.data(), type, c, stream);
       }});
  // A group: a ring of sends (two messages to the right, one from the left... of each), and
  // one to itself; the receive buffer holds the three received messages back to back.
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  all.push_back({"send/recv group", 3 * count, 3 * count, false,
                 [=](const void* s, void* d, cclComm_t c, cclStream_t stream) {
                   const auto* in = static_cast<const std::byte*>(s);
                   auto* out = static_cast<std::byte*>(d);
                   cclGroupStart();
                   cclSend(in, count, type, right, c, stream);
                   cclRecv(out, count, type, left, c, stream);
                   cclSend(in + count * e, count, type, right, c, stream);
                   cclRecv(out + count * e, count, type, left, c, stream);
                   cclSend(in + 2 * count * e, count, type, r, c, stream);
                   cclRecv(out + 2 * count * e, count, type, r, c, stream);
                   return cclGroupEnd();
                 }});
  return all;
}

class DeviceWorldRanks : public DeviceWorld, public testing::WithParamInterface<int> {};

TEST_P(DeviceWorldRanks, EveryCollectiveEqualsTheHostPath) {
  const int n = GetParam();
  const int before = fake::kernel_launches();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    // Past a scratch half (32 KiB) for the float types, within it for the byte types.
    for (size_t count : {size_t{1}, size_t{5000}}) {
      for (cclDataType_t type : {cclFloat32, cclInt8, cclBfloat16, cclFloat64}) {
        for (cclRedOp_t op : {cclSum, cclMax, cclAvg}) {
          if (op == cclAvg && type == cclInt8) continue;
          for (const Case& c : cases(n, count, op, type, comm.rank())) {
            std::vector<std::byte> out;
            expect_same_as_host(comm, c, type, static_cast<int>(count % 7), &out);
            if (testing::Test::HasFatalFailure()) return;
            if (c.name.starts_with("allreduce")) {
              expect_allreduced(out, type, op, n, static_cast<int>(count % 7), c.name);
            }
          }
        }
      }
    }
  });
  if (n > 1) {
    EXPECT_GT(fake::kernel_launches(), before) << "the device path launched nothing";
  }
}

// Every datatype and op of the reducing collectives, one size.
TEST_P(DeviceWorldRanks, EveryDatatypeAndOp) {
  const int n = GetParam();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    for (int t = 0; t < cclNumTypes; ++t) {
      const auto type = static_cast<cclDataType_t>(t);
      const bool integer = t <= cclUint64;
      for (cclRedOp_t op : {cclSum, cclProd, cclMax, cclMin, cclAvg}) {
        if (op == cclAvg && integer) continue;
        for (Case& c : cases(n, 333, op, type, comm.rank())) {
          if (c.name != "allreduce" && c.name != "reducescatter") continue;
          std::vector<std::byte> out;
          expect_same_as_host(comm, c, type, t, &out);
          if (testing::Test::HasFatalFailure()) return;
          if (c.name == "allreduce") expect_allreduced(out, type, op, n, t, c.name);
        }
      }
    }
  });
}

TEST_P(DeviceWorldRanks, PreMulSumScalesEachRanksOwnInput) {
  const int n = GetParam();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const float scalar = comm.rank() % 2 == 0 ? 2.0f : 1.0f;
    cclRedOp_t op;
    ASSERT_EQ(cclRedOpCreatePreMulSum(&op, const_cast<float*>(&scalar), cclFloat32, 0, comm.get()),
              cclSuccess);
    for (const Case& c : cases(n, 1000, op, cclFloat32, comm.rank())) {
      expect_same_as_host(comm, c, cclFloat32, 3);
    }
    EXPECT_EQ(cclRedOpDestroy(op, comm.get()), cclSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceWorldRanks, testing::Values(1, 2, 3, 4, 8),
                         ccl_test::ranks_name);

// Enqueue-only: with every rank's CUDA stream held back (as by earlier work), every collective
// on it returns at once, nothing of it has run, and no host thread asked the driver whether a
// stream or event was done; once the streams go, the results are there.
TEST_F(DeviceWorld, CallsOnACudaStreamReturnBeforeItRunsAndNoHostThreadWaits) {
  constexpr int n = 3;
  constexpr size_t kCount = 20000;
  std::atomic<int> ready{0};
  std::atomic<int> waits_before{-1};
  std::atomic<int> queued{0};
  std::atomic<int> checked{0};
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const int r = comm.rank();
    CUstream_st* cuda = fake::create_stream(false);
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
    auto in = pattern(cclFloat32, kCount, r, 0);
    void* din = to_device(in);
    void* dout = to_device(std::vector<std::byte>(kCount * 4 * n, std::byte{0}));
    void* dred = to_device(std::vector<std::byte>(kCount * 4, std::byte{0}));
    auto gate = std::make_unique<fake::Gate>(cuda);
    // Every rank's stream is held before any rank queues (the counter below counts all).
    ready.fetch_add(1);
    while (ready.load() < n) std::this_thread::sleep_for(1ms);
    if (r == 0) waits_before = fake::host_waits();
    while (waits_before.load() < 0) std::this_thread::sleep_for(1ms);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(cclAllReduce(din, dred, kCount, cclFloat32, cclSum, comm.get(), stream), cclSuccess)
        << cclGetLastError(comm.get());
    ASSERT_EQ(cclAllGather(din, dout, kCount, cclFloat32, comm.get(), stream), cclSuccess);
    ASSERT_EQ(cclBroadcast(din, din, kCount, cclFloat32, 0, comm.get(), stream), cclSuccess);
    ASSERT_EQ(cclBarrier(comm.get(), stream), cclSuccess);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    queued.fetch_add(1);
    while (queued.load() < n) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(fake::host_waits(), waits_before.load()) << "a host thread waited for a stream";
    checked.fetch_add(1);
    while (checked.load() < n) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(cclStreamQuery(stream), cclInProgress);
    EXPECT_EQ(from_device(dred, kCount * 4), std::vector<std::byte>(kCount * 4, std::byte{0}))
        << "the allreduce ran before its stream did";
    gate->open();
    ASSERT_EQ(cclStreamSynchronize(stream), cclSuccess) << cclGetLastError(comm.get());
    std::vector<float> sum(kCount, 0.0f);
    for (int q = 0; q < n; ++q) {
      const auto theirs = pattern(cclFloat32, kCount, q, 0);
      for (size_t i = 0; i < kCount; ++i) {
        float v;
        std::memcpy(&v, theirs.data() + i * 4, 4);
        sum[i] += v;
      }
    }
    std::vector<float> got(kCount);
    fake::from_device(got.data(), dred, kCount * 4);
    EXPECT_EQ(got, sum);
    // The allgather: every rank's input in rank order; the broadcast after it: rank 0's input.
    std::vector<std::byte> gathered;
    for (int q = 0; q < n; ++q) {
      const auto theirs = pattern(cclFloat32, kCount, q, 0);
      gathered.insert(gathered.end(), theirs.begin(), theirs.end());
    }
    EXPECT_EQ(from_device(dout, kCount * 4 * n), gathered) << "allgather";
    EXPECT_EQ(from_device(din, kCount * 4), pattern(cclFloat32, kCount, 0, 0)) << "broadcast";
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
    fake::destroy_stream(cuda);
  });
}

// One communicator's calls on two CUDA streams run in the order they were made, as NCCL orders
// its work after the communicator's previous operation whatever its stream. The streams are held
// in the worst order: rank 0's first stream and rank 1's second, so that unordered, rank 0 would
// run its second call against rank 1's first in the same scratch and flags.
TEST_F(DeviceWorld, CallsOnTwoStreamsRunInTheOrderTheyWereMade) {
  constexpr int n = 2;
  constexpr size_t kCount = 30000;  // several chunks of the 32 KiB halves
  ccl::Config config = ccl_test::test_config();
  config.timeout = std::chrono::seconds(5);  // unordered, a program would wait for its peer's
  ccl_test::run_ranks(
      n,
      [&](ccl::Communicator& comm) {
        const int r = comm.rank();
        CUstream_st* cuda[2] = {fake::create_stream(false), fake::create_stream(false)};
        cclStream_t stream[2] = {nullptr, nullptr};
        for (int k = 0; k < 2; ++k) ASSERT_EQ(cclStreamFromCuda(cuda[k], &stream[k]), cclSuccess);
        void* din[2];
        void* dout[2];
        for (int k = 0; k < 2; ++k) {
          din[k] = to_device(pattern(cclFloat32, kCount, r, k));
          dout[k] = to_device(std::vector<std::byte>(kCount * 4, std::byte{0}));
        }
        {
          fake::Gate gate(cuda[r == 0 ? 0 : 1]);
          ASSERT_EQ(
              cclAllReduce(din[0], dout[0], kCount, cclFloat32, cclSum, comm.get(), stream[0]),
              cclSuccess);
          ASSERT_EQ(cclAllGather(din[1], dout[1], kCount / n, cclFloat32, comm.get(), stream[1]),
                    cclSuccess);
          std::this_thread::sleep_for(200ms);  // the open stream runs what it may
        }
        for (int k = 0; k < 2; ++k) {
          EXPECT_EQ(cclStreamSynchronize(stream[k]), cclSuccess) << cclGetLastError(comm.get());
        }
        cclResult_t async = cclSuccess;
        EXPECT_EQ(cclCommGetAsyncError(comm.get(), &async), cclSuccess);
        EXPECT_EQ(async, cclSuccess) << cclGetLastError(comm.get());
        // Expected values computed here, apart from the kernels: sums of 1s and 2s, and each
        // rank's first kCount / n elements in rank order.
        std::vector<float> sum(kCount, 0.0f);
        std::vector<float> gathered;
        for (int q = 0; q < n; ++q) {
          for (size_t i = 0; i < kCount; ++i) sum[i] += (q + i) % 3 == 0 ? 2.0f : 1.0f;
          for (size_t i = 0; i < kCount / n; ++i)
            gathered.push_back((q + i + 1) % 3 == 0 ? 2.0f : 1.0f);
        }
        std::vector<float> got(kCount);
        fake::from_device(got.data(), dout[0], kCount * 4);
        EXPECT_EQ(got, sum) << "the allreduce on the first stream";
        fake::from_device(got.data(), dout[1], kCount * 4);
        got.resize(gathered.size());
        EXPECT_EQ(got, gathered) << "the allgather on the second stream";
        for (int k = 0; k < 2; ++k) {
          EXPECT_EQ(cclStreamDestroy(stream[k]), cclSuccess);
          fake::destroy_stream(cuda[k]);
          fake::device_free(din[k]);
          fake::device_free(dout[k]);
        }
      },
      config);
}

// The ranks as processes, as they run on a GPU machine: forked children of this test, each with
// a communicator of its own, whose device world opens the peers' scratch through real CUDA IPC
// (the fake maps each at an address of the opener's), and whose collectives on device buffers
// and CUDA streams give exact results.
TEST_F(DeviceWorld, RanksThatAreProcessesOpenTheirPeersScratchThroughIpc) {
  if (!fake::kForkedChildrenRun) GTEST_SKIP() << "a forked child cannot start threads under TSan";
  constexpr int n = 3;
  constexpr size_t kCount = 20000;  // past a 32 KiB half
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    children.push_back(fake::start_child([&, r] {
      cclConfig_t config = CCL_CONFIG_INITIALIZER;
      config.timeoutMs = 20000;
      cclComm_t comm = nullptr;
      const int opens = fake::ipc_opens(), launches = fake::kernel_launches();
      EXPECT_EQ(cclCommInitRankConfig(&comm, n, id, r, &config), cclSuccess);
      EXPECT_EQ(fake::ipc_opens() - opens, n - 1) << "rank " << r << " opened its peers' scratch";
      CUstream_st* cuda = fake::create_stream(false);
      cclStream_t stream = nullptr;
      EXPECT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
      std::vector<float> in(kCount * n);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r + 1 + i % 5);
      void* din = fake::device_alloc(in.size() * 4);
      fake::to_device(din, in.data(), in.size() * 4);
      void* dsum = fake::device_alloc(kCount * 4);
      void* dall = fake::device_alloc(kCount * n * 4);
      EXPECT_EQ(cclAllReduce(din, dsum, kCount, cclFloat32, cclSum, comm, stream), cclSuccess);
      EXPECT_EQ(cclAllGather(din, dall, kCount, cclFloat32, comm, stream), cclSuccess);
      EXPECT_EQ(cclStreamSynchronize(stream), cclSuccess) << cclGetLastError(comm);
      EXPECT_GT(fake::kernel_launches(), launches) << "the device path ran nothing";
      std::vector<float> sum(kCount), all(kCount * n);
      fake::from_device(sum.data(), dsum, kCount * 4);
      fake::from_device(all.data(), dall, kCount * n * 4);
      for (size_t i = 0; i < kCount; ++i) {
        // Σ_q (q + 1 + i % 5) over n ranks.
        const float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 5));
        if (sum[i] != want) {
          ADD_FAILURE() << "rank " << r << ": sum[" << i << "] = " << sum[i] << ", want " << want;
          break;
        }
      }
      for (int q = 0; q < n; ++q) {
        const size_t i = q * kCount + kCount - 1;  // the last element of rank q's block
        EXPECT_EQ(all[i], static_cast<float>(q + 1 + (kCount - 1) % 5)) << "rank " << r;
      }
      EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
      EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
      fake::destroy_stream(cuda);
    }));
  }
  for (pid_t child : children) EXPECT_TRUE(fake::child_passed(child)) << "a rank process failed";
}

// A graph captured once replays the collective each time it runs, with each replay's inputs.
TEST_F(DeviceWorld, GraphCaptureReplaysTheCollective) {
  constexpr int n = 2;
  constexpr size_t kCount = 10000;
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const int r = comm.rank();
    CUstream_st* cuda = fake::create_stream(false);
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
    auto* din = static_cast<float*>(fake::device_alloc(kCount * 4));
    auto* dout = static_cast<float*>(fake::device_alloc(kCount * 4));
    // Thread-local: the ranks are threads of one process here, standing for processes, whose
    // captures do not forbid each other's calls (a global one would, within one process).
    fake::begin_capture(cuda, fake::CaptureMode::ThreadLocal);
    ASSERT_EQ(cclAllReduce(din, dout, kCount, cclFloat32, cclSum, comm.get(), stream), cclSuccess)
        << cclGetLastError(comm.get());
    // Host work cannot be captured: refused at once, naming why.
    std::vector<float> host(kCount, 1.0f);
    EXPECT_EQ(
        cclAllReduce(host.data(), host.data(), kCount, cclFloat32, cclSum, comm.get(), stream),
        cclInvalidUsage);
    EXPECT_NE(std::string(cclGetLastError(comm.get())).find("capturing"), std::string::npos);
    fake::Graph* graph = fake::end_capture(cuda);
    ASSERT_NE(graph, nullptr) << "the capture was invalidated";
    EXPECT_GT(fake::graph_nodes(graph), 0u);
    for (int replay = 1; replay <= 3; ++replay) {
      std::vector<float> in(kCount, static_cast<float>(replay * (r + 1)));
      fake::to_device(din, in.data(), kCount * 4);
      fake::launch_graph(graph, cuda);
      fake::synchronize(cuda);
      std::vector<float> out(kCount);
      fake::from_device(out.data(), dout, kCount * 4);
      EXPECT_EQ(out, std::vector<float>(kCount, static_cast<float>(replay * 3))) << replay;
    }
    fake::destroy_graph(graph);
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
    fake::destroy_stream(cuda);
  });
}

// CUDA forbids allocating during a capture. An in-place alltoallv sends from a device copy of its
// input: captured before any such copy exists, it is refused at once, naming why, and the capture
// stays valid; once an eager call has made the copy, the captured call uses it and replays right.
TEST_F(DeviceWorld, ACapturedInPlaceAlltoallvAllocatesNothing) {
  constexpr int n = 2;
  constexpr size_t kBlock = 3000;
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const int r = comm.rank();
    CUstream_st* cuda = fake::create_stream(false);
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
    auto* buf = static_cast<float*>(fake::device_alloc(n * kBlock * 4));
    const std::vector<size_t> counts(n, kBlock), displs = {0, kBlock};
    auto alltoallv = [&] {
      return cclAlltoAllV(buf, counts.data(), displs.data(), buf, counts.data(), displs.data(),
                          cclFloat32, comm.get(), stream);
    };
    // Block q of rank r holds 10 r + q; after the exchange block q holds 10 q + r.
    auto fill = [&] {
      std::vector<float> in(n * kBlock);
      for (int q = 0; q < n; ++q) std::fill_n(in.begin() + q * kBlock, kBlock, 10.0f * r + q);
      fake::to_device(buf, in.data(), in.size() * 4);
    };
    auto expect_exchanged = [&](const char* what) {
      std::vector<float> out(n * kBlock);
      fake::from_device(out.data(), buf, out.size() * 4);
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(out[q * kBlock], 10.0f * q + r) << what << ": block " << q;
        EXPECT_EQ(out[q * kBlock + kBlock - 1], 10.0f * q + r) << what << ": block " << q;
      }
    };

    fake::begin_capture(cuda, fake::CaptureMode::ThreadLocal);
    EXPECT_EQ(alltoallv(), cclInvalidUsage);
    EXPECT_NE(std::string(cclGetLastError(comm.get())).find("graph capture"), std::string::npos)
        << cclGetLastError(comm.get());
    fake::Graph* refused = fake::end_capture(cuda);
    EXPECT_NE(refused, nullptr) << "the refusal invalidated the capture";
    if (refused != nullptr) fake::destroy_graph(refused);

    fill();
    ASSERT_EQ(alltoallv(), cclSuccess) << cclGetLastError(comm.get());
    ASSERT_EQ(cclStreamSynchronize(stream), cclSuccess);
    expect_exchanged("eager");

    fake::begin_capture(cuda, fake::CaptureMode::ThreadLocal);
    ASSERT_EQ(alltoallv(), cclSuccess) << cclGetLastError(comm.get());
    fake::Graph* graph = fake::end_capture(cuda);
    ASSERT_NE(graph, nullptr) << "the capture was invalidated (an allocation during it?)";
    fill();
    fake::launch_graph(graph, cuda);
    fake::synchronize(cuda);
    expect_exchanged("replayed");
    fake::destroy_graph(graph);
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
    fake::destroy_stream(cuda);
    fake::device_free(buf);
  });
}

// A rank whose peer never calls: its stream is released within the timeout (the fake would
// abort after 60 s of a stream waiting), and it reports the failure.
TEST_F(DeviceWorld, APeerThatNeverCallsIsATimeoutNotAHang) {
  ccl::Config config = ccl_test::test_config();
  config.timeout = 1s;
  std::atomic<bool> done{false};
  ccl_test::run_ranks(
      2,
      [&](ccl::Communicator& comm) {
        if (comm.rank() == 1) {
          while (!done.load()) std::this_thread::sleep_for(5ms);
          return;
        }
        CUstream_st* cuda = fake::create_stream(false);
        cclStream_t stream = nullptr;
        ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
        void* d = fake::device_alloc(4096);
        const auto start = std::chrono::steady_clock::now();
        ASSERT_EQ(cclAllReduce(d, d, 1024, cclFloat32, cclSum, comm.get(), stream), cclSuccess);
        const cclResult_t result = cclStreamSynchronize(stream);
        EXPECT_TRUE(result == cclTimeout || result == cclRemoteError) << result;
        EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
        cclResult_t async = cclSuccess;
        EXPECT_EQ(cclCommGetAsyncError(comm.get(), &async), cclSuccess);
        EXPECT_EQ(async, cclTimeout);
        EXPECT_NE(std::string(cclGetLastError(comm.get())).find("timeout"), std::string::npos);
        fake::synchronize(cuda);  // released: the stream has gone on
        EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
        fake::destroy_stream(cuda);
        done = true;
      },
      config);
}

// An abort on one rank releases the other's stream too (through the page they share).
TEST_F(DeviceWorld, AnAbortReleasesEveryRanksStream) {
  std::atomic<bool> queued{false};
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    if (comm.rank() == 1) {
      while (!queued.load()) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(20ms);
      EXPECT_EQ(cclCommAbort(comm.release()), cclSuccess);
      return;
    }
    CUstream_st* cuda = fake::create_stream(false);
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
    void* d = fake::device_alloc(4096);
    ASSERT_EQ(cclAllReduce(d, d, 1024, cclFloat32, cclSum, comm.get(), stream), cclSuccess);
    queued = true;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(cclStreamSynchronize(stream), cclRemoteError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
    fake::destroy_stream(cuda);
  });
}

// A captured collective has no clock on the device (CUDA has no timed stream wait) and no
// watchdog entry (its replays are the graph's): what bounds a replay whose peer never replays is
// the communicator's failure or abort, which releases every wait of its flags, captured or not.
TEST_F(DeviceWorld, AnAbortReleasesAReplayedGraphWhosePeerNeverReplays) {
  std::atomic<bool> launched{false};
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    CUstream_st* cuda = fake::create_stream(false);
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
    void* d = fake::device_alloc(4096);
    fake::begin_capture(cuda, fake::CaptureMode::ThreadLocal);
    ASSERT_EQ(cclAllReduce(d, d, 1024, cclFloat32, cclSum, comm.get(), stream), cclSuccess);
    fake::Graph* graph = fake::end_capture(cuda);
    ASSERT_NE(graph, nullptr);
    if (comm.rank() == 1) {  // captured, never replayed; then it gives up on the communicator
      while (!launched.load()) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(50ms);
      EXPECT_EQ(cclCommAbort(comm.release()), cclSuccess);
    } else {
      fake::launch_graph(graph, cuda);
      launched = true;
      const auto start = std::chrono::steady_clock::now();
      fake::synchronize(cuda);  // the fake gives up after 60 s (a hang on a GPU)
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    }
    fake::destroy_graph(graph);
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
    fake::destroy_stream(cuda);
  });
}

TEST_F(DeviceWorld, DeviceAndHostBuffersInOneCallAreRefused) {
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    void* d = fake::device_alloc(4096);
    std::vector<float> h(1024);
    EXPECT_EQ(cclAllReduce(d, h.data(), 1024, cclFloat32, cclSum, comm.get(), nullptr),
              cclInvalidArgument);
    EXPECT_NE(std::string(cclGetLastError(comm.get())).find("device and host"), std::string::npos);
  });
}

// Without P2P between the ranks' GPUs, or with one rank unable to reach a peer, no rank has a
// device world: the collectives go through host memory, with the same results and no kernel.
TEST_F(DeviceWorld, GpusWithoutP2PDeclineTogetherAndStage) {
  for (bool refuse_enable : {false, true}) {
    fake::set_devices(2, refuse_enable);  // with P2P said, but the enable refused
    fake::refuse_peer_access_enable(refuse_enable);
    const int before = fake::kernel_launches();
    ccl_test::run_ranks(
        4,
        [&](ccl::Communicator& comm) {
          for (const Case& c : cases(4, 300, cclSum, cclFloat32, comm.rank())) {
            expect_same_as_host(comm, c, cclFloat32, 1);
          }
        },
        ccl_test::test_config(), [](int r) { fake::use_device(r % 2); });
    EXPECT_EQ(fake::kernel_launches(), before) << refuse_enable;
    fake::refuse_peer_access_enable(false);
  }
}

// Over NVLink and over PCIe P2P alike.
TEST_F(DeviceWorld, GpusWithP2PRunOnTheDevice) {
  for (bool nvlink : {true, false}) {
    fake::set_devices(2, true, nvlink);
    const int before = fake::kernel_launches();
    ccl_test::run_ranks(
        4,
        [&](ccl::Communicator& comm) {
          for (const Case& c : cases(4, 300, cclSum, cclFloat32, comm.rank())) {
            expect_same_as_host(comm, c, cclFloat32, 2);
          }
        },
        ccl_test::test_config(), [](int r) { fake::use_device(r % 2); });
    EXPECT_GT(fake::kernel_launches(), before) << nvlink;
  }
}

// The allreduce's choice follows the slowest link: two-shot reads less of the peers' memory,
// which pays sooner over PCIe; at 2 ranks both read as much and one-shot, with fewer
// operations, wins at every size.
TEST(DevicePlan, TwoShotPaysSoonerOverPcie) {
  using ccl::cuda::PeerLink;
  using A = ccl::algo::device::AllReduceAlgorithm;
  const ccl::tune::Selection any;
  const ccl::DeviceLinks nvlink = ccl::DeviceLinks::of(PeerLink::NvLink);
  const ccl::DeviceLinks pcie = ccl::DeviceLinks::of(PeerLink::Pcie);
  EXPECT_EQ(ccl::choose_all_reduce(1 << 20, 8, false, nvlink, any), A::OneShot);
  EXPECT_EQ(ccl::choose_all_reduce(1 << 20, 8, false, pcie, any), A::TwoShot);
  EXPECT_EQ(ccl::choose_all_reduce(64 << 20, 8, false, nvlink, any), A::TwoShot);
  EXPECT_EQ(ccl::choose_all_reduce(8, 8, false, pcie, any), A::OneShot);
  EXPECT_EQ(ccl::choose_all_reduce(64 << 20, 2, false, pcie, any), A::OneShot);
  // CCL_PROTO decides where it names one.
  const auto simple = ccl::tune::Selection::parse("", "Simple");
  EXPECT_EQ(ccl::choose_all_reduce(8, 8, false, nvlink, simple), A::TwoShot);
}

TEST_F(DeviceWorld, CclCudaIpcZeroKeepsTheHostPath) {
  setenv("CCL_CUDA_IPC", "0", 1);
  const int before = fake::kernel_launches();
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    for (const Case& c : cases(2, 300, cclSum, cclFloat32, comm.rank())) {
      expect_same_as_host(comm, c, cclFloat32, 4);
    }
  });
  unsetenv("CCL_CUDA_IPC");
  EXPECT_EQ(fake::kernel_launches(), before);
}

// A rank whose program is done (it published its part) may destroy its communicator while its
// peers still read its scratch: the scratch stays until they have (the fake frees device memory
// at once, and gives its pages back zeroed).
TEST_F(DeviceWorld, ARankDoneFirstLeavesItsScratchUntilItsPeersReadIt) {
  constexpr int n = 4;
  constexpr size_t kCount = 1000;
  for (int iteration = 0; iteration < 5; ++iteration) {
    ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
      const int r = comm.rank();
      std::vector<float> in(kCount * n, static_cast<float>(1 << r));
      void* d = fake::device_alloc(in.size() * 4);
      fake::to_device(d, in.data(), in.size() * 4);
      void* o = fake::device_alloc(kCount * 4);
      CUstream_st* cuda = fake::create_stream(false);
      cclStream_t stream = nullptr;
      ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
      ASSERT_EQ(cclReduceScatter(d, o, kCount, cclFloat32, cclSum, comm.get(), stream), cclSuccess);
      ASSERT_EQ(cclStreamSynchronize(stream), cclSuccess);
      std::vector<float> out(kCount);
      fake::from_device(out.data(), o, kCount * 4);
      EXPECT_EQ(out, std::vector<float>(kCount, 15.0f)) << "rank " << r;
      cclStreamDestroy(stream);
      fake::destroy_stream(cuda);
      fake::device_free(d);
      fake::device_free(o);
    });  // each rank destroys its communicator as soon as it is done
  }
}

// An event recorded after device work on a CUDA stream is done only once the stream ran it,
// and a stream made from another CUDA stream that waits on it waits on the device.
TEST_F(DeviceWorld, EventsCoverTheDeviceWork) {
  constexpr size_t kCount = 4096;
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    CUstream_st* first = fake::create_stream(false);
    CUstream_st* second = fake::create_stream(false);
    cclStream_t a = nullptr, b = nullptr;
    ASSERT_EQ(cclStreamFromCuda(first, &a), cclSuccess);
    ASSERT_EQ(cclStreamFromCuda(second, &b), cclSuccess);
    std::vector<float> ones(kCount, 1.0f);
    auto* d = static_cast<float*>(fake::device_alloc(kCount * 4));
    auto* e = static_cast<float*>(fake::device_alloc(kCount * 4));
    fake::to_device(d, ones.data(), kCount * 4);
    cclEvent_t event = nullptr;
    ASSERT_EQ(cclEventCreate(&event), cclSuccess);
    {
      fake::Gate gate(first);
      ASSERT_EQ(cclAllReduce(d, d, kCount, cclFloat32, cclSum, comm.get(), a), cclSuccess);
      ASSERT_EQ(cclEventRecord(event, a), cclSuccess);
      EXPECT_EQ(cclEventQuery(event), cclInProgress);
      // Work on the second stream after the wait sees the allreduce's result.
      ASSERT_EQ(cclStreamWaitEvent(b, event), cclSuccess);
      fake::launch(second, [&] { std::memcpy(fake::alias(e), fake::alias(d), kCount * 4); });
      std::this_thread::sleep_for(20ms);
      EXPECT_EQ(cclEventQuery(event), cclInProgress);
    }
    EXPECT_EQ(cclEventSynchronize(event), cclSuccess);
    EXPECT_EQ(cclEventQuery(event), cclSuccess);
    fake::synchronize(second);
    std::vector<float> seen(kCount);
    fake::from_device(seen.data(), e, kCount * 4);
    EXPECT_EQ(seen, std::vector<float>(kCount, 2.0f));
    cclEventDestroy(event);
    cclStreamDestroy(a);
    cclStreamDestroy(b);
    fake::destroy_stream(first);
    fake::destroy_stream(second);
  });
}

// Ranks of one process on one GPU share its legacy stream: queueing both ranks' programs there
// would leave one waiting behind the other, so it is refused, naming why.
TEST_F(DeviceWorld, RanksSharingAGpuInOneProcessCannotUseItsLegacyStream) {
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    cclStream_t legacy = nullptr;
    ASSERT_EQ(cclStreamFromCuda(nullptr, &legacy), cclSuccess);
    void* d = fake::device_alloc(4096);
    EXPECT_EQ(cclAllReduce(d, d, 1024, cclFloat32, cclSum, comm.get(), legacy), cclInvalidUsage);
    EXPECT_NE(std::string(cclGetLastError(comm.get())).find("legacy"), std::string::npos);
    // The NULL stream (ccl's own stream, waited for) still works.
    EXPECT_EQ(cclAllReduce(d, d, 1024, cclFloat32, cclSum, comm.get(), nullptr), cclSuccess);
    cclStreamDestroy(legacy);
  });
}

// Without a device world (here: CCL_CUDA_IPC=0; across hosts the same), allreduce, reduce and
// broadcast of device buffers are staged chunk by chunk, the copies of one chunk overlapping the
// transfer of another; a rank with host buffers cuts its call into the same chunks.
TEST_F(DeviceWorld, StagedChunksOverlapCopiesAndMatchTheHostPath) {
  setenv("CCL_CUDA_IPC", "0", 1);
  setenv("CCL_CUDA_STAGING_CHUNK", "4K", 1);
  const int before = fake::kernel_launches();
  ccl_test::run_ranks(3, [&](ccl::Communicator& comm) {
    for (size_t count : {size_t{5000}, size_t{1024}, size_t{1025}}) {
      for (cclRedOp_t op : {cclSum, cclAvg}) {
        for (const Case& c : cases(3, count, op, cclFloat32, comm.rank())) {
          if (c.name.rfind("allreduce", 0) != 0 && c.name.rfind("reduce", 0) != 0 &&
              c.name.rfind("broadcast", 0) != 0) {
            continue;
          }
          if (c.name == "reducescatter") continue;
          expect_same_as_host(comm, c, cclFloat32, static_cast<int>(count % 5));
        }
      }
    }
    // One rank with host buffers, the others with device buffers: the same chunks everywhere.
    constexpr size_t kCount = 3000;
    const auto in = pattern(cclFloat32, kCount, comm.rank(), 0);
    std::vector<std::byte> want(kCount * 4);
    {
      std::vector<std::byte> host = in;
      ASSERT_EQ(
          cclAllReduce(host.data(), want.data(), kCount, cclFloat32, cclSum, comm.get(), nullptr),
          cclSuccess);
    }
    if (comm.rank() == 1) {
      std::vector<std::byte> host = in, out(kCount * 4);
      ASSERT_EQ(
          cclAllReduce(host.data(), out.data(), kCount, cclFloat32, cclSum, comm.get(), nullptr),
          cclSuccess);
      EXPECT_EQ(out, want);
    } else {
      void* d = to_device(in);
      ASSERT_EQ(cclAllReduce(d, d, kCount, cclFloat32, cclSum, comm.get(), nullptr), cclSuccess)
          << cclGetLastError(comm.get());
      EXPECT_EQ(from_device(d, kCount * 4), want);
      fake::device_free(d);
    }
  });
  unsetenv("CCL_CUDA_STAGING_CHUNK");
  unsetenv("CCL_CUDA_IPC");
  EXPECT_EQ(fake::kernel_launches(), before) << "staged: the host reduces";
}

// cclCommRegister of device memory: a region of its pages, with a dmabuf from the driver for
// the transports that register device memory (ib: GPUDirect RDMA, tests/unit/transport_ib).
TEST_F(DeviceWorld, RegisteringDeviceMemoryExportsADmabufOfItsPages) {
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    auto* d = static_cast<std::byte*>(fake::device_alloc(3 * 4096));
    const int before = fake::dmabuf_export_count();
    void* handle = nullptr;
    ASSERT_EQ(cclCommRegister(comm.get(), d + 100, 5000, &handle), cclSuccess)
        << cclGetLastError(comm.get());
    EXPECT_GE(fake::dmabuf_export_count(), before + 1);
    EXPECT_EQ(cclCommDeregister(comm.get(), handle), cclSuccess);
    fake::device_free(d);
  });
}

}  // namespace
