// cclCommSplit: color = rank % 2 with key = -rank (the child's order reversed), CCL_SPLIT_NOCOLOR,
// NULL config, collectives on the child and the parent interleaved and side by side on two
// streams, a split of a split, the child destroyed before the parent; cclCommFinalize then
// cclCommDestroy, with collectives after finalize refused; argument errors.
#include <algorithm>
#include <string>
#include <vector>

#include "check_harness.h"

namespace ccl::set_check {
namespace {

void check_shape(cclComm_t comm, int want_rank, int want_count, const char* what) {
  int rank = -1, count = -1;
  EXPECT_RESULT(cclCommUserRank(comm, &rank), cclSuccess);
  EXPECT_RESULT(cclCommCount(comm, &count), cclSuccess);
  if (rank != want_rank || count != want_count) {
    fprintf(stderr, "rank %d: FAIL %s: rank %d of %d, expected %d of %d\n", g_rank, what, rank,
            count, want_rank, want_count);
    ++g_failures;
  }
}

// Sums `mine` over `comm` with an allreduce of `count` copies (count > 1 to move real data) and
// checks every element against `want`.
void check_sum(cclComm_t comm, int64_t mine, int64_t want, size_t count, cclStream_t stream,
               const char* what) {
  std::vector<int64_t> data(count, mine), expected(count, want);
  if (!EXPECT_DONE(cclAllReduce(data.data(), data.data(), count, cclInt64, cclSum, comm, stream),
                   stream)) {
    return;
  }
  compare(what, cclInt64, reinterpret_cast<uint8_t*>(data.data()),
          reinterpret_cast<uint8_t*>(expected.data()), count);
}

// Parent ranks in child order for color `color` and key -rank: descending parent rank.
std::vector<int> reversed_members(int nranks, int color) {
  std::vector<int> members;
  for (int r = nranks - 1; r >= 0; --r) {
    if (r % 2 == color) members.push_back(r);
  }
  return members;
}

int64_t sum_of(const std::vector<int>& ranks) {
  int64_t sum = 0;
  for (int r : ranks) sum += r;
  return sum;
}

void check_grandchild(const Context& ctx, cclComm_t child, const std::vector<int>& members,
                      int child_rank) {
  // Pairs of child ranks; key = child rank keeps their order.
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.commName = "grandchild";
  cclComm_t grandchild = nullptr;
  if (!EXPECT_RESULT(cclCommSplit(child, child_rank / 2, child_rank, &grandchild, &config),
                     cclSuccess)) {
    return;
  }
  const int size = std::min<int>(2, static_cast<int>(members.size()) - child_rank / 2 * 2);
  check_shape(grandchild, child_rank % 2, size, "split of a split");
  std::vector<int> pair;
  for (int c = child_rank / 2 * 2; c < child_rank / 2 * 2 + size; ++c) pair.push_back(members[c]);
  // Interleaved on the three communicators.
  check_sum(grandchild, g_rank, sum_of(pair), 1003, nullptr, "grandchild allreduce");
  check_sum(child, g_rank, sum_of(members), 7, nullptr, "child allreduce after grandchild");
  check_sum(ctx.comm, 1, ctx.nranks, 7, nullptr, "parent allreduce after grandchild");
  check_sum(grandchild, 1, size, 7, ctx.stream, "grandchild allreduce stream");
  EXPECT_RESULT(cclCommDestroy(grandchild), cclSuccess);
}

void check_reversed_split(const Context& ctx) {
  const int n = ctx.nranks;
  const int color = g_rank % 2;
  cclComm_t child = nullptr;
  // NULL config: the parent's settings.
  if (!EXPECT_RESULT(cclCommSplit(ctx.comm, color, -g_rank, &child, nullptr), cclSuccess)) return;
  if (!EXPECT_TRUE(child != nullptr)) return;
  const std::vector<int> members = reversed_members(n, color);
  const int child_rank =
      static_cast<int>(std::find(members.begin(), members.end(), g_rank) - members.begin());
  check_shape(child, child_rank, static_cast<int>(members.size()), "split rank % 2, key -rank");

  // Child and parent interleaved on the NULL stream.
  check_sum(child, g_rank, sum_of(members), 7, nullptr, "child allreduce");
  check_sum(ctx.comm, g_rank, static_cast<int64_t>(n) * (n - 1) / 2, 7, nullptr,
            "parent allreduce between child operations");
  // Child rank 0 is the highest parent rank of the color: a broadcast from it shows the order.
  int64_t value = g_rank;
  if (EXPECT_RESULT(cclBroadcast(&value, &value, 1, cclInt64, 0, child, nullptr), cclSuccess)) {
    if (value != members[0]) {
      fprintf(stderr, "rank %d: FAIL child broadcast from child rank 0 gave %lld, expected %d\n",
              g_rank, static_cast<long long>(value), members[0]);
      ++g_failures;
    }
  }
  // The child's allgather lists the parent ranks in child order.
  std::vector<int32_t> ranks(members.size(), -1);
  const int32_t mine = g_rank;
  if (EXPECT_RESULT(cclAllGather(&mine, ranks.data(), 1, cclInt32, child, nullptr), cclSuccess)) {
    const std::vector<int32_t> want(members.begin(), members.end());
    compare("child allgather of parent ranks", cclInt32, reinterpret_cast<uint8_t*>(ranks.data()),
            reinterpret_cast<const uint8_t*>(want.data()), members.size());
  }
  // Side by side: the parent's and the child's operations in flight at once on two streams.
  cclStream_t other = nullptr;
  if (EXPECT_RESULT(cclStreamCreate(&other), cclSuccess)) {
    const size_t count = 100003;
    std::vector<int64_t> a(count, 1), b(count, g_rank);
    EXPECT_RESULT(cclAllReduce(a.data(), a.data(), count, cclInt64, cclSum, ctx.comm, ctx.stream),
                  cclSuccess);
    EXPECT_RESULT(cclAllReduce(b.data(), b.data(), count, cclInt64, cclSum, child, other),
                  cclSuccess);
    EXPECT_RESULT(cclStreamSynchronize(other), cclSuccess);
    EXPECT_RESULT(cclStreamSynchronize(ctx.stream), cclSuccess);
    std::vector<int64_t> want_a(count, n), want_b(count, sum_of(members));
    compare("parent allreduce beside the child's", cclInt64, reinterpret_cast<uint8_t*>(a.data()),
            reinterpret_cast<uint8_t*>(want_a.data()), count);
    compare("child allreduce beside the parent's", cclInt64, reinterpret_cast<uint8_t*>(b.data()),
            reinterpret_cast<uint8_t*>(want_b.data()), count);
    EXPECT_RESULT(cclStreamDestroy(other), cclSuccess);
  }
  check_grandchild(ctx, child, members, child_rank);
  EXPECT_RESULT(cclCommDestroy(child), cclSuccess);  // before the parent
  check_sum(ctx.comm, 1, n, 7, nullptr, "parent allreduce after the child was destroyed");
}

// Rank 0 passes CCL_SPLIT_NOCOLOR and gets NULL; the others form a communicator without it.
void check_nocolor(const Context& ctx) {
  static char not_a_comm;
  cclComm_t child = reinterpret_cast<cclComm_t>(&not_a_comm);
  const int color = g_rank == 0 ? CCL_SPLIT_NOCOLOR : 7;
  if (!EXPECT_RESULT(cclCommSplit(ctx.comm, color, 0, &child, nullptr), cclSuccess)) return;
  if (g_rank == 0) {
    EXPECT_TRUE(child == nullptr);
    return;
  }
  if (!EXPECT_TRUE(child != nullptr && child != reinterpret_cast<cclComm_t>(&not_a_comm))) return;
  check_shape(child, g_rank - 1, ctx.nranks - 1, "split without rank 0");
  check_sum(child, g_rank, static_cast<int64_t>(ctx.nranks) * (ctx.nranks - 1) / 2, 1003, nullptr,
            "allreduce without rank 0");
  EXPECT_RESULT(cclCommDestroy(child), cclSuccess);
}

// A child finalized (after its queued work is done) refuses collectives, then is destroyed.
void check_finalize_child(const Context& ctx) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  cclComm_t child = nullptr;
  if (!EXPECT_RESULT(cclCommSplit(ctx.comm, 0, g_rank, &child, &config), cclSuccess)) return;
  check_shape(child, g_rank, ctx.nranks, "split with one color");
  check_sum(child, 2, 2 * ctx.nranks, 1003, ctx.stream, "child allreduce before finalize");
  EXPECT_RESULT(cclCommFinalize(child), cclSuccess);
  float x[8] = {};  // room for an allgather of 1 element per rank, were it accepted
  EXPECT_RESULT(cclAllReduce(x, x, 4, cclFloat32, cclSum, child, nullptr), cclInvalidUsage);
  EXPECT_RESULT(cclBroadcast(x, x, 4, cclFloat32, 0, child, nullptr), cclInvalidUsage);
  EXPECT_RESULT(cclAllGather(x, x, 1, cclFloat32, child, nullptr), cclInvalidUsage);
  EXPECT_RESULT(cclCommDestroy(child), cclSuccess);
  check_sum(ctx.comm, 1, ctx.nranks, 7, nullptr, "parent allreduce after the child's finalize");
}

void check_errors(const Context& ctx) {
  cclComm_t child = nullptr;
  const cclResult_t kBad = cclInvalidArgument;
  EXPECT_RESULT(cclCommSplit(nullptr, 0, 0, &child, nullptr), kBad);
  EXPECT_RESULT(cclCommSplit(ctx.comm, 0, 0, nullptr, nullptr), kBad);
  EXPECT_RESULT(cclCommSplit(ctx.comm, -5, 0, &child, nullptr), kBad);  // negative, not NOCOLOR
  cclConfig_t bad = CCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_RESULT(cclCommSplit(ctx.comm, 0, 0, &child, &bad), kBad);
  EXPECT_RESULT(cclCommFinalize(nullptr), kBad);
}

}  // namespace

void run_split(const Context& ctx) {
  check_errors(ctx);
  check_reversed_split(ctx);
  check_nocolor(ctx);
  check_finalize_child(ctx);
}

// Ends the main communicator: finalize, then nothing more runs on it, then destroy.
void run_finalize(const Context& ctx) {
  EXPECT_RESULT(cclStreamSynchronize(ctx.stream), cclSuccess);
  if (!EXPECT_RESULT(cclCommFinalize(ctx.comm), cclSuccess)) {
    EXPECT_RESULT(cclCommDestroy(ctx.comm), cclSuccess);
    return;
  }
  float x[4] = {};
  EXPECT_RESULT(cclAllReduce(x, x, 4, cclFloat32, cclSum, ctx.comm, nullptr), cclInvalidUsage);
  EXPECT_RESULT(cclReduce(x, x, 4, cclFloat32, cclSum, 0, ctx.comm, nullptr), cclInvalidUsage);
  EXPECT_RESULT(cclBarrier(ctx.comm, nullptr), cclInvalidUsage);
  EXPECT_RESULT(cclCommDestroy(ctx.comm), cclSuccess);
}

}  // namespace ccl::set_check
