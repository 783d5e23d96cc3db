// Run under cclrun at any rank count: the whole collective set through the public C API.
// This file: reduce (every root), allgather, reduce-scatter and all-to-all for every datatype and
// op, counts 0 (NULL buffers), 1, 7, 1003 and 1M+3, in place and out of place, misaligned
// buffers, the NULL stream and a cclStream_t; and main(), which runs the other files' parts:
// uneven collectives, PreMulSum ops, send/recv and groups, split and finalize, argument errors.
// Exits 0 when every check passed on this rank; `--quick` keeps the larger rank counts short;
// `--part NAME` runs one part (with the argument errors).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check_harness.h"

namespace ccl::set_check {
namespace {

constexpr size_t kLarge = 1000003;  // 1M+3: odd, and past any eager or single-chunk size

// "reduce sum root 2 in-place stream": what a failure message names (root -1: none).
std::string describe(const char* name, cclRedOp_t op, int root, bool in_place, cclStream_t stream) {
  std::string text = name;
  if (op != cclNumOps) text += std::string(" ") + op_name(op);
  if (root >= 0) text += " root " + std::to_string(root);
  if (in_place) text += " in-place";
  if (stream != nullptr) text += " stream";
  return text;
}

// A send buffer that an out-of-place call must leave as it was.
void check_unchanged(const std::string& what, cclDataType_t type, const Buffer& buffer,
                     const std::vector<uint8_t>& original) {
  compare((what + " (sendbuff changed)").c_str(), type, buffer.data, original.data(),
          original.size() / datatype_size(type));
}

void check_reduce(const Context& ctx, cclDataType_t type, cclRedOp_t op, size_t count, int root,
                  bool in_place, size_t misalign, cclStream_t stream) {
  const size_t bytes = count * datatype_size(type);
  Buffer send(bytes, misalign), recv(bytes, (misalign + 2) % 4), want(bytes, 0);
  for (size_t i = 0; i < count; ++i) {
    store_value(type, send.data, i, input_value(op, g_rank, i));
    store_expected(type, op, ctx.nranks, want.data, i);
  }
  const std::vector<uint8_t> original(send.data, send.data + bytes);
  const bool is_root = g_rank == root;
  // Non-roots pass NULL as recvbuff in the in-place variant: API.md lets a rank leave out a
  // buffer it does not use.
  void* out = is_root ? (in_place ? send.data : recv.data) : (in_place ? nullptr : recv.data);
  if (!EXPECT_DONE(cclReduce(send.data, out, count, type, op, root, ctx.comm, stream), stream)) {
    return;
  }
  const std::string what = describe("reduce", op, root, in_place, stream);
  if (is_root) compare(what.c_str(), type, static_cast<uint8_t*>(out), want.data, count);
  if (!in_place || !is_root) check_unchanged(what, type, send, original);
}

void check_allgather(const Context& ctx, cclDataType_t type, size_t count, bool in_place,
                     size_t misalign, cclStream_t stream) {
  const size_t bytes = count * datatype_size(type);
  const size_t total = bytes * ctx.nranks;
  Buffer recv(total, misalign), send(bytes, (misalign + 2) % 4), want(total, 0);
  for (int q = 0; q < ctx.nranks; ++q) fill_movement(type, want.data + q * bytes, q, 0, count);
  uint8_t* in = in_place ? recv.data + g_rank * bytes : send.data;
  fill_movement(type, in, g_rank, 0, count);
  if (!EXPECT_DONE(cclAllGather(in, recv.data, count, type, ctx.comm, stream), stream)) return;
  const std::string what = describe("allgather", cclNumOps, -1, in_place, stream);
  compare(what.c_str(), type, recv.data, want.data, count * ctx.nranks);
  if (!in_place) {
    compare((what + " (sendbuff changed)").c_str(), type, send.data, want.data + g_rank * bytes,
            count);
  }
}

void check_reduce_scatter(const Context& ctx, cclDataType_t type, cclRedOp_t op, size_t count,
                          bool in_place, size_t misalign, cclStream_t stream) {
  const size_t bytes = count * datatype_size(type);
  const size_t all = count * ctx.nranks;
  Buffer send(all * datatype_size(type), misalign), recv(bytes, (misalign + 2) % 4), want(bytes, 0);
  for (size_t j = 0; j < all; ++j) store_value(type, send.data, j, input_value(op, g_rank, j));
  for (size_t i = 0; i < count; ++i) {
    store_value(type, want.data, i, expected_value(type, op, ctx.nranks, g_rank * count + i));
  }
  const std::vector<uint8_t> original(send.data, send.data + all * datatype_size(type));
  uint8_t* out = in_place ? send.data + g_rank * bytes : recv.data;
  if (!EXPECT_DONE(cclReduceScatter(send.data, out, count, type, op, ctx.comm, stream), stream)) {
    return;
  }
  const std::string what = describe("reducescatter", op, -1, in_place, stream);
  compare(what.c_str(), type, out, want.data, count);
  if (!in_place) check_unchanged(what, type, send, original);
}

void check_alltoall(const Context& ctx, cclDataType_t type, size_t count, bool in_place,
                    size_t misalign, cclStream_t stream) {
  const int n = ctx.nranks;
  const size_t bytes = count * datatype_size(type);
  Buffer send(bytes * n, misalign), recv(bytes * n, (misalign + 2) % 4), want(bytes * n, 0);
  // The block from rank q to rank p is stream q*n + p of the movement pattern.
  for (int p = 0; p < n; ++p) fill_movement(type, send.data + p * bytes, g_rank * n + p, 0, count);
  for (int q = 0; q < n; ++q) fill_movement(type, want.data + q * bytes, q * n + g_rank, 0, count);
  const std::vector<uint8_t> original(send.data, send.data + bytes * n);
  uint8_t* out = in_place ? send.data : recv.data;
  if (!EXPECT_DONE(cclAlltoAll(send.data, out, count, type, ctx.comm, stream), stream)) return;
  const std::string what = describe("alltoall", cclNumOps, -1, in_place, stream);
  compare(what.c_str(), type, out, want.data, count * n);
  if (!in_place) check_unchanged(what, type, send, original);
}

void check_zero_counts(const Context& ctx, cclStream_t stream) {
  for (int root : {0, ctx.nranks - 1}) {
    EXPECT_DONE(cclReduce(nullptr, nullptr, 0, cclFloat32, cclSum, root, ctx.comm, stream), stream);
  }
  EXPECT_DONE(cclAllGather(nullptr, nullptr, 0, cclInt64, ctx.comm, stream), stream);
  EXPECT_DONE(cclReduceScatter(nullptr, nullptr, 0, cclBfloat16, cclAvg, ctx.comm, stream), stream);
  EXPECT_DONE(cclAlltoAll(nullptr, nullptr, 0, cclUint8, ctx.comm, stream), stream);
  // Count 0 touches nothing, also when the buffers are real.
  uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_DONE(cclReduceScatter(bytes, bytes + 4, 0, cclInt32, cclMax, ctx.comm, stream), stream);
  EXPECT_DONE(cclAlltoAll(bytes, bytes + 1, 0, cclInt8, ctx.comm, stream), stream);
  for (int i = 0; i < 8; ++i) {
    if (bytes[i] != i + 1) fail("count 0 changed a buffer");
  }
}

// Several operations queued on one stream, synchronized once, then all checked.
void check_stream_batch(const Context& ctx) {
  const int n = ctx.nranks;
  const size_t count = 4099;
  const size_t bytes = count * sizeof(float);
  Buffer red(bytes, 1), red_out(bytes, 3), gather_in(bytes, 0), gather(bytes * n, 1);
  Buffer scatter(bytes * n, 0), a2a(bytes * n, 3), sum(bytes, 0);
  for (size_t i = 0; i < count; ++i)
    store_value(cclFloat32, red.data, i, input_value(cclMax, g_rank, i));
  fill_movement(cclFloat32, gather_in.data, g_rank, 0, count);
  for (size_t j = 0; j < count * n; ++j) {
    store_value(cclFloat32, scatter.data, j, input_value(cclSum, g_rank, j));
  }
  for (int p = 0; p < n; ++p)
    fill_movement(cclFloat32, a2a.data + p * bytes, g_rank * n + p, 0, count);
  for (size_t i = 0; i < count; ++i)
    store_value(cclFloat32, sum.data, i, input_value(cclSum, g_rank, i));
  cclComm_t c = ctx.comm;
  cclStream_t s = ctx.stream;
  EXPECT_RESULT(cclReduce(red.data, red_out.data, count, cclFloat32, cclMax, n - 1, c, s),
                cclSuccess);
  EXPECT_RESULT(cclAllGather(gather_in.data, gather.data, count, cclFloat32, c, s), cclSuccess);
  EXPECT_RESULT(cclReduceScatter(scatter.data, scatter.data + g_rank * bytes, count, cclFloat32,
                                 cclSum, c, s),
                cclSuccess);
  EXPECT_RESULT(cclAlltoAll(a2a.data, a2a.data, count, cclFloat32, c, s), cclSuccess);
  EXPECT_RESULT(cclAllReduce(sum.data, sum.data, count, cclFloat32, cclSum, c, s), cclSuccess);
  if (!EXPECT_RESULT(cclStreamSynchronize(s), cclSuccess)) return;
  Buffer want(bytes * n, 0);
  for (size_t i = 0; i < count; ++i) store_expected(cclFloat32, cclMax, n, want.data, i);
  if (g_rank == n - 1) compare("stream batch reduce", cclFloat32, red_out.data, want.data, count);
  for (int q = 0; q < n; ++q) fill_movement(cclFloat32, want.data + q * bytes, q, 0, count);
  compare("stream batch allgather", cclFloat32, gather.data, want.data, count * n);
  for (size_t i = 0; i < count; ++i) {
    store_value(cclFloat32, want.data, i,
                expected_value(cclFloat32, cclSum, n, g_rank * count + i));
  }
  compare("stream batch reducescatter", cclFloat32, scatter.data + g_rank * bytes, want.data,
          count);
  for (int q = 0; q < n; ++q)
    fill_movement(cclFloat32, want.data + q * bytes, q * n + g_rank, 0, count);
  compare("stream batch alltoall", cclFloat32, a2a.data, want.data, count * n);
  for (size_t i = 0; i < count; ++i) store_expected(cclFloat32, cclSum, n, want.data, i);
  compare("stream batch allreduce", cclFloat32, sum.data, want.data, count);
}

}  // namespace

void run_collectives(const Context& ctx) {
  const int n = ctx.nranks;
  int k = 0;  // rotates the misalignment and, every third call, the stream
  auto stream_for = [&](int i) { return i % 3 == 2 ? ctx.stream : nullptr; };
  check_zero_counts(ctx, nullptr);
  check_zero_counts(ctx, ctx.stream);
  for (int t = 0; t < cclNumTypes; ++t) {
    const auto type = static_cast<cclDataType_t>(t);
    for (int o = 0; o < cclNumOps; ++o) {
      const auto op = static_cast<cclRedOp_t>(o);
      for (int root = 0; root < n; ++root) {
        check_reduce(ctx, type, op, 7, root, false, misalign_for(k), stream_for(k));
        ++k;
        check_reduce(ctx, type, op, 7, root, true, misalign_for(k), stream_for(k));
        ++k;
        if (!ctx.quick) check_reduce(ctx, type, op, 1, root, false, misalign_for(k++), nullptr);
      }
      check_reduce(ctx, type, op, 1, n - 1, true, 0, nullptr);
      check_reduce(ctx, type, op, 1003, (t + o) % n, false, misalign_for(k), stream_for(k));
      ++k;
      for (size_t count : {size_t{1}, size_t{7}}) {
        check_reduce_scatter(ctx, type, op, count, false, misalign_for(k), stream_for(k));
        ++k;
        check_reduce_scatter(ctx, type, op, count, true, misalign_for(k), stream_for(k));
        ++k;
      }
      check_reduce_scatter(ctx, type, op, 1003, (t + o) % 2 == 0, misalign_for(k), stream_for(k));
      ++k;
    }
    for (size_t count : {size_t{1}, size_t{7}, size_t{1003}}) {
      for (bool in_place : {false, true}) {
        check_allgather(ctx, type, count, in_place, misalign_for(k), stream_for(k));
        ++k;
        check_alltoall(ctx, type, count, in_place, misalign_for(k), stream_for(k));
        ++k;
      }
    }
  }
  // Past the small-message paths: every op at 65537 floats, then 1M+3 for a few types.
  for (int o = 0; o < cclNumOps; ++o) {
    const auto op = static_cast<cclRedOp_t>(o);
    check_reduce(ctx, cclFloat32, op, 65537, o % n, o % 2 == 1, 1, nullptr);
    check_reduce_scatter(ctx, cclFloat32, op, 65537, o % 2 == 0, 3, nullptr);
  }
  check_reduce(ctx, cclFloat32, cclSum, kLarge, n - 1, false, 1, nullptr);
  check_allgather(ctx, cclFloat32, kLarge, false, 3, nullptr);
  check_reduce_scatter(ctx, cclFloat32, cclSum, kLarge, false, 1, nullptr);
  check_alltoall(ctx, cclFloat32, (kLarge / n) | 1, false, 1, ctx.stream);
  if (!ctx.quick) {
    check_reduce(ctx, cclBfloat16, cclAvg, kLarge, 0, true, 0, ctx.stream);
    check_allgather(ctx, cclInt8, kLarge, true, 1, nullptr);
    check_reduce_scatter(ctx, cclFloat16, cclMax, kLarge, true, 0, ctx.stream);
    check_alltoall(ctx, cclUint8, kLarge, true, 3, nullptr);
  }
  check_stream_batch(ctx);
}

}  // namespace ccl::set_check

using namespace ccl::set_check;

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (strcmp(argv[i], "--part") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--quick] [--part NAME]\n", argv[0]);
      return 2;
    }
  }
  int nranks = 0;
  cclComm_t comm = init_from_env(&nranks);
  if (comm == nullptr) return 2;
  cclStream_t stream = nullptr;
  if (!EXPECT_RESULT(cclStreamCreate(&stream), cclSuccess)) return 1;
  const Context ctx{comm, nranks, quick, stream};

  struct Part {
    const char* name;
    void (*run)(const Context&);
  };
  // Argument errors first (they send nothing), finalize last (it ends the communicator).
  const Part parts[] = {{"errors", run_argument_errors},    {"collectives", run_collectives},
                        {"vector", run_vector_collectives}, {"premulsum", run_premulsum},
                        {"p2p", run_point_to_point},        {"split", run_split},
                        {"finalize", run_finalize}};
  bool known = only.empty();
  for (const Part& part : parts) {
    if (!only.empty() && only != part.name && strcmp(part.name, "errors") != 0) continue;
    known = known || only == part.name;
    const int before = g_failures;
    part.run(ctx);
    // A barrier between parts keeps a failure's messages next to the part that caused it.
    if (strcmp(part.name, "finalize") != 0) EXPECT_RESULT(cclBarrier(comm, nullptr), cclSuccess);
    if (g_failures != before) {
      fprintf(stderr, "rank %d: part %s: %d failures\n", g_rank, part.name, g_failures - before);
    }
  }
  if (!known) fprintf(stderr, "unknown part %s\n", only.c_str());
  EXPECT_RESULT(cclStreamDestroy(stream), cclSuccess);
  // run_finalize finalizes and destroys `comm`; other single parts leave it to us.
  if (!only.empty() && only != "finalize") EXPECT_RESULT(cclCommDestroy(comm), cclSuccess);

  printf("rank %d: %d checks, %d failures\n", g_rank, g_checks, g_failures);
  return g_failures == 0 && known ? 0 : 1;
}
