// The uneven collectives (cclAllGatherV, cclAlltoAllV) with counts that include zeros and
// displacements out of rank order with gaps (which must stay untouched), in place and out of
// place; and the argument errors of every collective of the set.
#include <algorithm>
#include <string>
#include <vector>

#include "check_harness.h"

namespace ccl::set_check {
namespace {

constexpr size_t kLarge = 1000003;

// Places blocks of `counts` elements one after the other, `gap` elements before each, in rank
// order or reversed; returns the total length.
size_t layout(const std::vector<size_t>& counts, size_t gap, bool reversed,
              std::vector<size_t>* displs) {
  const int n = static_cast<int>(counts.size());
  displs->assign(n, 0);
  size_t at = 0;
  for (int k = 0; k < n; ++k) {
    const int q = reversed ? n - 1 - k : k;
    at += gap;
    (*displs)[q] = at;
    at += counts[q];
  }
  return at;
}

// "alltoallv scale 7 in-place stream" (allgatherv: "total", the elements of recvbuff).
std::string describe(const char* name, const char* size_name, size_t size, bool in_place,
                     cclStream_t stream) {
  char text[128];
  snprintf(text, sizeof(text), "%s %s %zu%s%s", name, size_name, size, in_place ? " in-place" : "",
           stream != nullptr ? " stream" : "");
  return text;
}

void check_allgatherv(const Context& ctx, cclDataType_t type, const std::vector<size_t>& counts,
                      size_t gap, bool in_place, size_t misalign, cclStream_t stream) {
  const size_t size = datatype_size(type);
  std::vector<size_t> displs;
  const size_t total = layout(counts, gap, true, &displs);
  Buffer recv(total * size, misalign), want(total * size, 0), send(counts[g_rank] * size, 1);
  for (int q = 0; q < ctx.nranks; ++q) {
    fill_movement(type, want.data + displs[q] * size, q, 0, counts[q]);
  }
  uint8_t* in = in_place ? recv.data + displs[g_rank] * size : send.data;
  fill_movement(type, in, g_rank, 0, counts[g_rank]);
  // A rank with nothing to send passes NULL, and so do all when nothing moves at all.
  const void* sendbuff = counts[g_rank] == 0 ? nullptr : in;
  void* recvbuff = total == 0 ? nullptr : recv.data;
  if (!EXPECT_DONE(cclAllGatherV(sendbuff, counts[g_rank], recvbuff, counts.data(), displs.data(),
                                 type, ctx.comm, stream),
                   stream)) {
    return;
  }
  const std::string what = describe("allgatherv", "total", total, in_place, stream);
  compare(what.c_str(), type, recv.data, want.data, total);
}

// Elements rank q sends to rank p: zero for a third of the pairs, uneven for the others.
size_t a2av_count(int q, int p, size_t scale) {
  return (q + 2 * p + 1) % 3 == 0 ? 0 : static_cast<size_t>(q + p + 1) * scale;
}

void check_alltoallv(const Context& ctx, cclDataType_t type, size_t scale, bool in_place,
                     size_t misalign, cclStream_t stream) {
  const int n = ctx.nranks;
  const size_t size = datatype_size(type);
  std::vector<size_t> sendcounts(n), recvcounts(n), sdispls, rdispls;
  for (int p = 0; p < n; ++p) sendcounts[p] = a2av_count(g_rank, p, scale);
  for (int q = 0; q < n; ++q) recvcounts[q] = a2av_count(q, g_rank, scale);
  // Send blocks in reverse rank order, receive blocks in rank order, with different gaps.
  const size_t send_total = layout(sendcounts, 2, true, &sdispls);
  const size_t recv_total = layout(recvcounts, 3, false, &rdispls);
  const size_t length = in_place ? std::max(send_total, recv_total) : send_total;
  Buffer send(length * size, misalign), recv(recv_total * size, (misalign + 2) % 4);
  Buffer want(recv_total * size, 0);
  // The block from q to p is stream q*n + p of the movement pattern.
  for (int p = 0; p < n; ++p) {
    fill_movement(type, send.data + sdispls[p] * size, g_rank * n + p, 0, sendcounts[p]);
  }
  for (int q = 0; q < n; ++q) {
    fill_movement(type, want.data + rdispls[q] * size, q * n + g_rank, 0, recvcounts[q]);
  }
  const std::vector<uint8_t> original(send.data, send.data + length * size);
  uint8_t* out = in_place ? send.data : recv.data;
  const void* sendbuff = send_total == 0 ? nullptr : send.data;
  void* recvbuff = recv_total == 0 ? nullptr : out;
  if (!EXPECT_DONE(cclAlltoAllV(sendbuff, sendcounts.data(), sdispls.data(), recvbuff,
                                recvcounts.data(), rdispls.data(), type, ctx.comm, stream),
                   stream)) {
    return;
  }
  const std::string what = describe("alltoallv", "scale", scale, in_place, stream);
  if (in_place) {
    // Only the receive blocks are defined afterwards.
    for (int q = 0; q < n; ++q) {
      const size_t at = rdispls[q] * size;
      if (!compare((what + " from rank " + std::to_string(q)).c_str(), type, out + at,
                   want.data + at, recvcounts[q])) {
        break;
      }
    }
  } else {
    compare(what.c_str(), type, out, want.data, recv_total);
    compare((what + " (sendbuff changed)").c_str(), type, send.data, original.data(), length);
  }
}

}  // namespace

void run_vector_collectives(const Context& ctx) {
  const int n = ctx.nranks;
  auto uneven = [&](size_t scale) {
    std::vector<size_t> counts(n);
    for (int q = 0; q < n; ++q) counts[q] = q % 3 == 1 ? 0 : (2 * q + 1) * scale;
    return counts;
  };
  int k = 0;
  auto stream_for = [&](int i) { return i % 3 == 2 ? ctx.stream : nullptr; };
  for (int t = 0; t < cclNumTypes; ++t) {
    const auto type = static_cast<cclDataType_t>(t);
    for (bool in_place : {false, true}) {
      check_allgatherv(ctx, type, uneven(1), 3, in_place, misalign_for(k), stream_for(k));
      ++k;
      check_alltoallv(ctx, type, 1, in_place, misalign_for(k), stream_for(k));
      ++k;
    }
  }
  for (cclDataType_t type : {cclFloat32, cclInt8, cclFloat16, cclInt64}) {
    for (bool in_place : {false, true}) {
      check_allgatherv(ctx, type, uneven(7), 0, in_place, misalign_for(k), stream_for(k));
      ++k;
      check_allgatherv(ctx, type, uneven(1003), 1, in_place, misalign_for(k), stream_for(k));
      ++k;
      check_alltoallv(ctx, type, 7, in_place, misalign_for(k), stream_for(k));
      ++k;
      check_alltoallv(ctx, type, 1003, in_place, misalign_for(k), stream_for(k));
      ++k;
    }
  }
  // Only the last rank sends; nobody sends (NULL buffers everywhere).
  std::vector<size_t> last(n, 0);
  last[n - 1] = 5;
  check_allgatherv(ctx, cclUint32, last, 2, false, 1, nullptr);
  check_allgatherv(ctx, cclUint32, std::vector<size_t>(n, 0), 0, false, 0, nullptr);
  check_allgatherv(ctx, cclUint32, std::vector<size_t>(n, 0), 0, false, 0, ctx.stream);
  check_alltoallv(ctx, cclDouble, 0, false, 0, nullptr);
  check_alltoallv(ctx, cclDouble, 0, true, 0, ctx.stream);
  // Large and odd: one rank sends 1M+3 elements; all-to-all blocks of up to (2n-1) * scale.
  std::vector<size_t> big = uneven(3);
  big[0] = kLarge;
  check_allgatherv(ctx, cclFloat32, big, 5, false, 3, nullptr);
  check_alltoallv(ctx, cclFloat32, ctx.quick ? 10007 : 100003, false, 1, nullptr);
  if (!ctx.quick) {
    check_allgatherv(ctx, cclBfloat16, big, 0, true, 0, ctx.stream);
    check_alltoallv(ctx, cclUint8, 100003, true, 3, ctx.stream);
  }
}

void run_argument_errors(const Context& ctx) {
  const int n = ctx.nranks;
  cclComm_t c = ctx.comm;
  const auto bad_type = static_cast<cclDataType_t>(99);
  const auto bad_op = static_cast<cclRedOp_t>(1000);  // no PreMulSum op exists yet
  float x[64] = {};
  float y[64] = {};
  const size_t four = 4;
  std::vector<size_t> counts(n, four), displs(n);
  for (int q = 0; q < n; ++q) displs[q] = q * four;
  std::vector<size_t> wrong = counts;
  wrong[g_rank] = 3;  // differs from sendcount on this rank
  const cclResult_t kBad = cclInvalidArgument;

  EXPECT_RESULT(cclReduce(x, y, 4, cclFloat32, cclSum, 0, nullptr, nullptr), kBad);
  EXPECT_RESULT(cclReduce(x, y, 4, bad_type, cclSum, 0, c, nullptr), kBad);
  EXPECT_RESULT(cclReduce(x, y, 4, cclFloat32, bad_op, 0, c, nullptr), kBad);
  EXPECT_RESULT(cclReduce(x, y, 4, cclFloat32, static_cast<cclRedOp_t>(-1), 0, c, nullptr), kBad);
  EXPECT_RESULT(cclReduce(x, y, 4, cclFloat32, cclSum, -1, c, nullptr), kBad);
  EXPECT_RESULT(cclReduce(x, y, 4, cclFloat32, cclSum, n, c, nullptr), kBad);
  EXPECT_RESULT(cclReduce(nullptr, y, 4, cclFloat32, cclSum, 0, c, nullptr), kBad);
  // Every rank names itself root, so every rank is the one that needs recvbuff.
  EXPECT_RESULT(cclReduce(x, nullptr, 4, cclFloat32, cclSum, g_rank, c, nullptr), kBad);
  // Errors come from the call also when it would be queued on a stream.
  EXPECT_RESULT(cclReduce(x, y, 4, bad_type, cclSum, 0, c, ctx.stream), kBad);

  EXPECT_RESULT(cclAllGather(x, y, 4, cclFloat32, nullptr, nullptr), kBad);
  EXPECT_RESULT(cclAllGather(x, y, 4, bad_type, c, nullptr), kBad);
  EXPECT_RESULT(cclAllGather(nullptr, y, 4, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAllGather(x, nullptr, 4, cclFloat32, c, ctx.stream), kBad);

  EXPECT_RESULT(cclReduceScatter(x, y, 4, cclFloat32, cclSum, nullptr, nullptr), kBad);
  EXPECT_RESULT(cclReduceScatter(x, y, 4, bad_type, cclSum, c, nullptr), kBad);
  EXPECT_RESULT(cclReduceScatter(x, y, 4, cclFloat32, bad_op, c, nullptr), kBad);
  EXPECT_RESULT(cclReduceScatter(nullptr, y, 4, cclFloat32, cclSum, c, nullptr), kBad);
  EXPECT_RESULT(cclReduceScatter(x, nullptr, 4, cclFloat32, cclSum, c, ctx.stream), kBad);

  EXPECT_RESULT(cclAlltoAll(x, y, 4, cclFloat32, nullptr, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAll(x, y, 4, bad_type, c, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAll(nullptr, y, 4, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAll(x, nullptr, 4, cclFloat32, c, ctx.stream), kBad);

  const size_t* cs = counts.data();
  const size_t* ds = displs.data();
  EXPECT_RESULT(cclAllGatherV(x, 4, y, cs, ds, cclFloat32, nullptr, nullptr), kBad);
  EXPECT_RESULT(cclAllGatherV(x, 4, y, cs, ds, bad_type, c, nullptr), kBad);
  EXPECT_RESULT(cclAllGatherV(x, 4, y, nullptr, ds, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAllGatherV(x, 4, y, cs, nullptr, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAllGatherV(x, 4, y, wrong.data(), ds, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAllGatherV(nullptr, 4, y, cs, ds, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAllGatherV(x, 4, nullptr, cs, ds, cclFloat32, c, ctx.stream), kBad);

  EXPECT_RESULT(cclAlltoAllV(x, cs, ds, y, cs, ds, cclFloat32, nullptr, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAllV(x, cs, ds, y, cs, ds, bad_type, c, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAllV(x, nullptr, ds, y, cs, ds, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAllV(x, cs, nullptr, y, cs, ds, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAllV(x, cs, ds, y, nullptr, ds, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAllV(x, cs, ds, y, cs, nullptr, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAllV(nullptr, cs, ds, y, cs, ds, cclFloat32, c, nullptr), kBad);
  EXPECT_RESULT(cclAlltoAllV(x, cs, ds, nullptr, cs, ds, cclFloat32, c, ctx.stream), kBad);
  EXPECT_TRUE(cclGetLastError(c)[0] != '\0');

  // Nothing was sent: the communicator still works, with the same arguments made valid.
  for (int i = 0; i < 7; ++i) store_value(cclFloat32, x, i, input_value(cclSum, g_rank, i));
  Buffer want(7 * sizeof(float), 0);
  for (int i = 0; i < 7; ++i) store_expected(cclFloat32, cclSum, n, want.data, i);
  if (EXPECT_RESULT(cclAllReduce(x, y, 7, cclFloat32, cclSum, c, nullptr), cclSuccess)) {
    compare("allreduce after argument errors", cclFloat32, reinterpret_cast<uint8_t*>(y), want.data,
            7);
  }
  if (EXPECT_RESULT(cclReduce(x, y, 7, cclFloat32, cclSum, n - 1, c, nullptr), cclSuccess) &&
      g_rank == n - 1) {
    compare("reduce after argument errors", cclFloat32, reinterpret_cast<uint8_t*>(y), want.data,
            7);
  }
}

}  // namespace ccl::set_check
