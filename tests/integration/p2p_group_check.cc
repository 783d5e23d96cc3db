// Send/recv and groups: a ring inside a group (NULL stream and a cclStream_t), sends and receives
// posted in opposite orders on the two sides of a pair, several messages between one pair matched
// in posting order, send to self, sends/receives and collectives mixed in one group, nested
// groups (nothing issued before the outer end), blocking pairs outside a group, count 0, a
// receive from any source, and errors (cclGroupEnd without cclGroupStart, argument errors returned
// by the call that has them).
#include <string>
#include <vector>

#include "check_harness.h"

namespace ccl::set_check {
namespace {

int next_of(const Context& ctx) { return (g_rank + 1) % ctx.nranks; }
int prev_of(const Context& ctx) { return (g_rank + ctx.nranks - 1) % ctx.nranks; }
// Ranks pair up as (0,1), (2,3), ...; with an odd count the last rank is its own partner.
int partner_of(const Context& ctx) { return (g_rank ^ 1) < ctx.nranks ? g_rank ^ 1 : g_rank; }

// The payload of message `tag` sent by `sender`.
void fill_message(cclDataType_t type, uint8_t* buffer, int sender, int tag, size_t count) {
  fill_movement(type, buffer, sender * 8 + tag, 0, count);
}

bool check_message(const char* what, cclDataType_t type, const uint8_t* got, int sender, int tag,
                   size_t count) {
  Buffer want(count * datatype_size(type), 0);
  fill_message(type, want.data, sender, tag, count);
  return compare(what, type, got, want.data, count);
}

bool end_group(cclStream_t stream) {
  if (!EXPECT_RESULT(cclGroupEnd(), cclSuccess)) return false;
  return stream == nullptr || EXPECT_RESULT(cclStreamSynchronize(stream), cclSuccess);
}

void check_ring(const Context& ctx, cclDataType_t type, size_t count, cclStream_t stream) {
  const size_t bytes = count * datatype_size(type);
  Buffer send(bytes, 1), recv(bytes, 3);
  fill_message(type, send.data, g_rank, 0, count);
  if (!EXPECT_RESULT(cclGroupStart(), cclSuccess)) return;
  EXPECT_RESULT(cclSend(send.data, count, type, next_of(ctx), ctx.comm, stream), cclSuccess);
  EXPECT_RESULT(cclRecv(recv.data, count, type, prev_of(ctx), ctx.comm, stream), cclSuccess);
  if (!end_group(stream)) return;
  check_message(stream != nullptr ? "ring stream" : "ring", type, recv.data, prev_of(ctx), 0,
                count);
}

// Even ranks post send then receive, odd ranks receive then send, in one group.
void check_opposite_order(const Context& ctx, size_t count) {
  const int peer = partner_of(ctx);
  const size_t bytes = count * sizeof(float);
  Buffer send(bytes, 0), recv(bytes, 1);
  fill_message(cclFloat32, send.data, g_rank, 1, count);
  if (!EXPECT_RESULT(cclGroupStart(), cclSuccess)) return;
  if (g_rank % 2 == 0) {
    EXPECT_RESULT(cclSend(send.data, count, cclFloat32, peer, ctx.comm, nullptr), cclSuccess);
    EXPECT_RESULT(cclRecv(recv.data, count, cclFloat32, peer, ctx.comm, nullptr), cclSuccess);
  } else {
    EXPECT_RESULT(cclRecv(recv.data, count, cclFloat32, peer, ctx.comm, nullptr), cclSuccess);
    EXPECT_RESULT(cclSend(send.data, count, cclFloat32, peer, ctx.comm, nullptr), cclSuccess);
  }
  if (end_group(nullptr)) {
    check_message("opposite order", cclFloat32, recv.data, peer, 1, count);
  }
}

// Several messages to the partner (two of the same size, so only their order tells them apart),
// in one group or, outside a group, as blocking calls (even ranks send first).
void check_ordered_messages(const Context& ctx, bool grouped) {
  const int peer = partner_of(ctx);
  if (!grouped && peer == g_rank) return;  // a blocking send to oneself has no receiver yet
  const size_t counts[] = {7, 7, 1003, 1, 100003};
  const int kMessages = 5;
  std::vector<Buffer> sends, recvs;
  for (int m = 0; m < kMessages; ++m) {
    sends.emplace_back(counts[m] * 8, m % 4);
    recvs.emplace_back(counts[m] * 8, (m + 1) % 4);
    fill_message(cclInt64, sends[m].data, g_rank, 2 + m, counts[m]);
  }
  auto send_all = [&] {
    for (int m = 0; m < kMessages; ++m) {
      EXPECT_RESULT(cclSend(sends[m].data, counts[m], cclInt64, peer, ctx.comm, nullptr),
                    cclSuccess);
    }
  };
  auto recv_all = [&] {
    for (int m = 0; m < kMessages; ++m) {
      EXPECT_RESULT(cclRecv(recvs[m].data, counts[m], cclInt64, peer, ctx.comm, nullptr),
                    cclSuccess);
    }
  };
  if (grouped && !EXPECT_RESULT(cclGroupStart(), cclSuccess)) return;
  if (g_rank % 2 == 0 || peer == g_rank) {
    send_all();
    recv_all();
  } else {
    recv_all();
    send_all();
  }
  if (grouped && !end_group(nullptr)) return;
  for (int m = 0; m < kMessages; ++m) {
    const std::string what = std::string(grouped ? "grouped" : "blocking") + " message " +
                             std::to_string(m) + " from partner";
    if (!check_message(what.c_str(), cclInt64, recvs[m].data, peer, 2 + m, counts[m])) break;
  }
}

void check_self(const Context& ctx) {
  const size_t count = 1003;
  Buffer send(count * 4, 1), first(count * 4, 2), second(count * 4, 3);
  fill_message(cclInt32, send.data, g_rank, 3, count);
  if (!EXPECT_RESULT(cclGroupStart(), cclSuccess)) return;
  // Receive posted before the send; then a second pair: matched in posting order.
  EXPECT_RESULT(cclRecv(first.data, count, cclInt32, g_rank, ctx.comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclSend(send.data, count, cclInt32, g_rank, ctx.comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclSend(send.data, 5, cclInt32, g_rank, ctx.comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclRecv(second.data, 5, cclInt32, g_rank, ctx.comm, nullptr), cclSuccess);
  if (!end_group(nullptr)) return;
  check_message("send to self", cclInt32, first.data, g_rank, 3, count);
  check_message("second send to self", cclInt32, second.data, g_rank, 3, 5);
}

// Sends, receives, an allreduce and a broadcast in one group.
void check_mixed(const Context& ctx) {
  const int n = ctx.nranks;
  const size_t count = 5000, reduced = 1003;
  Buffer send(count * 4, 0), recv(count * 4, 1), sum(reduced * 4, 3), bcast(7 * 8, 1);
  Buffer want(reduced * 4, 0), want_bcast(7 * 8, 0);
  fill_message(cclFloat32, send.data, g_rank, 4, count);
  for (size_t i = 0; i < reduced; ++i) {
    store_value(cclInt32, sum.data, i, input_value(cclSum, g_rank, i));
    store_expected(cclInt32, cclSum, n, want.data, i);
  }
  fill_movement(cclFloat64, want_bcast.data, 77, 0, 7);
  if (g_rank == n - 1) memcpy(bcast.data, want_bcast.data, 7 * 8);
  if (!EXPECT_RESULT(cclGroupStart(), cclSuccess)) return;
  EXPECT_RESULT(cclSend(send.data, count, cclFloat32, next_of(ctx), ctx.comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclAllReduce(sum.data, sum.data, reduced, cclInt32, cclSum, ctx.comm, nullptr),
                cclSuccess);
  EXPECT_RESULT(cclRecv(recv.data, count, cclFloat32, prev_of(ctx), ctx.comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclBroadcast(bcast.data, bcast.data, 7, cclFloat64, n - 1, ctx.comm, nullptr),
                cclSuccess);
  if (!end_group(nullptr)) return;
  check_message("mixed group recv", cclFloat32, recv.data, prev_of(ctx), 4, count);
  compare("mixed group allreduce", cclInt32, sum.data, want.data, reduced);
  compare("mixed group broadcast", cclFloat64, bcast.data, want_bcast.data, 7);
}

// GroupStart twice, GroupEnd twice: the inner end issues nothing. A large ring send posted in the
// inner group could not complete before the receive posted after the inner end, and the send to
// self must not have arrived before the outer end.
void check_nested(const Context& ctx) {
  const size_t count = 1000003, small = 7;
  Buffer send(count * 4, 3), recv(count * 4, 1), self_send(small * 2, 0), self_recv(small * 2, 1);
  fill_message(cclFloat32, send.data, g_rank, 5, count);
  fill_message(cclFloat16, self_send.data, g_rank, 6, small);
  const std::vector<uint8_t> untouched(self_recv.data, self_recv.data + small * 2);
  if (!EXPECT_RESULT(cclGroupStart(), cclSuccess)) return;
  if (!EXPECT_RESULT(cclGroupStart(), cclSuccess)) {
    EXPECT_RESULT(cclGroupEnd(), cclSuccess);
    return;
  }
  EXPECT_RESULT(cclSend(self_send.data, small, cclFloat16, g_rank, ctx.comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclRecv(self_recv.data, small, cclFloat16, g_rank, ctx.comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclSend(send.data, count, cclFloat32, next_of(ctx), ctx.comm, nullptr), cclSuccess);
  EXPECT_RESULT(cclGroupEnd(), cclSuccess);
  if (memcmp(self_recv.data, untouched.data(), small * 2) != 0) {
    fail("nested group: the inner cclGroupEnd issued the operations");
  }
  EXPECT_RESULT(cclRecv(recv.data, count, cclFloat32, prev_of(ctx), ctx.comm, nullptr), cclSuccess);
  if (!end_group(nullptr)) return;
  check_message("nested group self", cclFloat16, self_recv.data, g_rank, 6, small);
  check_message("nested group ring", cclFloat32, recv.data, prev_of(ctx), 5, count);
}

// Outside a group: blocking pairs on the NULL stream and queued pairs on a stream; count 0.
void check_ungrouped(const Context& ctx) {
  const int peer = partner_of(ctx);
  if (peer != g_rank) {
    const size_t count = 4097;
    Buffer send(count, 0), recv(count, 1);
    fill_message(cclUint8, send.data, g_rank, 7, count);
    for (cclStream_t stream : {static_cast<cclStream_t>(nullptr), ctx.stream}) {
      memset(recv.data, 0, count);
      for (int step = 0; step < 2; ++step) {
        if ((step == 0) == (g_rank % 2 == 0)) {
          EXPECT_DONE(cclSend(send.data, count, cclUint8, peer, ctx.comm, stream), stream);
        } else {
          EXPECT_DONE(cclRecv(recv.data, count, cclUint8, peer, ctx.comm, stream), stream);
        }
      }
      check_message(stream != nullptr ? "stream pair" : "blocking pair", cclUint8, recv.data, peer,
                    7, count);
    }
  }
  // Count 0 with NULL buffers, posted symmetrically so that it works whether or not an empty
  // message is matched.
  for (int step = 0; step < 2; ++step) {
    if (peer == g_rank) break;
    if ((step == 0) == (g_rank % 2 == 0)) {
      EXPECT_RESULT(cclSend(nullptr, 0, cclFloat32, peer, ctx.comm, nullptr), cclSuccess);
    } else {
      EXPECT_RESULT(cclRecv(nullptr, 0, cclFloat32, peer, ctx.comm, nullptr), cclSuccess);
    }
  }
}

// cclRecvAnySource: rank 0 takes two messages from every other rank in whatever order they come
// (their payloads name the sender it reports), once small and once large (many slots, chunks,
// staged pieces), then acknowledges each sender by a named send so that the next round's
// messages cannot be mistaken for this one's. Then a receive queued on the stream before the call
// takes the peer's first message and the call its second; then the errors.
void check_any_source(const Context& ctx) {
  const int n = ctx.nranks;
  float x[4] = {};
  int source = -7;
  EXPECT_RESULT(cclRecvAnySource(x, 4, cclFloat32, nullptr, ctx.comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclRecvAnySource(x, 0, cclFloat32, &source, ctx.comm, nullptr), cclInvalidArgument);
  EXPECT_RESULT(cclRecvAnySource(nullptr, 4, cclFloat32, &source, ctx.comm, nullptr),
                cclInvalidArgument);
  EXPECT_RESULT(cclRecvAnySource(x, 4, cclFloat32, &source, nullptr, nullptr), cclInvalidArgument);
  if (EXPECT_RESULT(cclGroupStart(), cclSuccess)) {
    EXPECT_RESULT(cclRecvAnySource(x, 4, cclFloat32, &source, ctx.comm, nullptr), cclInvalidUsage);
    EXPECT_RESULT(cclGroupEnd(), cclSuccess);
  }
  if (n == 1) {  // no peer: refused, not a wait until the timeout
    EXPECT_RESULT(cclRecvAnySource(x, 4, cclFloat32, &source, ctx.comm, nullptr), cclInvalidUsage);
    return;
  }
  int ack = 0;
  for (const size_t count : {size_t{7}, size_t{300007}}) {
    const size_t bytes = count * sizeof(float);
    if (g_rank != 0) {
      Buffer send(bytes, 0);
      for (int m = 0; m < 2; ++m) {
        fill_message(cclFloat32, send.data, g_rank, 10 + m, count);
        EXPECT_RESULT(cclSend(send.data, count, cclFloat32, 0, ctx.comm, nullptr), cclSuccess);
      }
      EXPECT_RESULT(cclRecv(&ack, 1, cclInt32, 0, ctx.comm, nullptr), cclSuccess);
      continue;
    }
    std::vector<int> taken(static_cast<size_t>(n), 0);
    Buffer recv(bytes, 1);
    for (int k = 0; k < 2 * (n - 1); ++k) {
      source = -7;
      const cclStream_t stream = k % 2 == 0 ? nullptr : ctx.stream;
      if (!EXPECT_RESULT(cclRecvAnySource(recv.data, count, cclFloat32, &source, ctx.comm, stream),
                         cclSuccess)) {
        return;
      }
      if (!EXPECT_TRUE(source > 0 && source < n && taken[static_cast<size_t>(source)] < 2)) return;
      const std::string what = "message " + std::to_string(taken[static_cast<size_t>(source)]) +
                               " from any source (rank " + std::to_string(source) + ")";
      check_message(what.c_str(), cclFloat32, recv.data, source,
                    10 + taken[static_cast<size_t>(source)]++, count);
    }
    for (int p = 1; p < n; ++p) {
      EXPECT_RESULT(cclSend(&ack, 1, cclInt32, p, ctx.comm, nullptr), cclSuccess);
    }
  }
  // The stream's queued receive comes first.
  const size_t count = 1003;
  if (g_rank == 1) {
    Buffer send(count * 4, 0);
    for (int m = 0; m < 2; ++m) {
      fill_message(cclFloat32, send.data, g_rank, 20 + m, count);
      EXPECT_RESULT(cclSend(send.data, count, cclFloat32, 0, ctx.comm, nullptr), cclSuccess);
    }
  } else if (g_rank == 0) {
    Buffer first(count * 4, 1), second(count * 4, 2);
    EXPECT_RESULT(cclRecv(first.data, count, cclFloat32, 1, ctx.comm, ctx.stream), cclSuccess);
    source = -7;
    if (EXPECT_RESULT(cclRecvAnySource(second.data, count, cclFloat32, &source, ctx.comm, nullptr),
                      cclSuccess) &&
        EXPECT_TRUE(source == 1)) {
      EXPECT_RESULT(cclStreamSynchronize(ctx.stream), cclSuccess);
      check_message("queued receive before any source", cclFloat32, first.data, 1, 20, count);
      check_message("any source after a queued receive", cclFloat32, second.data, 1, 21, count);
    }
  }
  // Nobody sends to rank 0 (the next part's ring does) before it is done with any source.
  if (g_rank == 0) {
    for (int p = 1; p < n; ++p) {
      EXPECT_RESULT(cclSend(&ack, 1, cclInt32, p, ctx.comm, nullptr), cclSuccess);
    }
  } else {
    EXPECT_RESULT(cclRecv(&ack, 1, cclInt32, 0, ctx.comm, nullptr), cclSuccess);
  }
}

void check_errors(const Context& ctx, bool groups) {
  const int n = ctx.nranks;
  float x[8] = {};
  const auto bad_type = static_cast<cclDataType_t>(99);
  const cclResult_t kBad = cclInvalidArgument;
  EXPECT_RESULT(cclGroupEnd(), cclInvalidUsage);  // no group open
  EXPECT_RESULT(cclSend(x, 4, cclFloat32, n, ctx.comm, nullptr), kBad);
  EXPECT_RESULT(cclSend(x, 4, cclFloat32, -1, ctx.comm, nullptr), kBad);
  EXPECT_RESULT(cclSend(nullptr, 4, cclFloat32, g_rank, ctx.comm, nullptr), kBad);
  EXPECT_RESULT(cclSend(x, 4, bad_type, g_rank, ctx.comm, nullptr), kBad);
  EXPECT_RESULT(cclSend(x, 4, cclFloat32, g_rank, nullptr, nullptr), kBad);
  EXPECT_RESULT(cclRecv(x, 4, cclFloat32, n, ctx.comm, nullptr), kBad);
  EXPECT_RESULT(cclRecv(x, 4, cclFloat32, -1, ctx.comm, ctx.stream), kBad);
  EXPECT_RESULT(cclRecv(nullptr, 4, cclFloat32, g_rank, ctx.comm, nullptr), kBad);
  EXPECT_RESULT(cclRecv(x, 4, bad_type, g_rank, ctx.comm, nullptr), kBad);
  EXPECT_RESULT(cclRecv(x, 4, cclFloat32, g_rank, nullptr, nullptr), kBad);
  if (!groups) return;
  // Inside a group the call that has the error returns it. What cclGroupEnd then returns is not
  // specified; it must return, and leave no group open.
  if (EXPECT_RESULT(cclGroupStart(), cclSuccess)) {
    EXPECT_RESULT(cclSend(x, 4, cclFloat32, n, ctx.comm, nullptr), kBad);
    EXPECT_RESULT(cclRecv(x, 4, cclFloat32, -1, ctx.comm, nullptr), kBad);
    EXPECT_RESULT(cclRecv(nullptr, 4, cclFloat32, prev_of(ctx), ctx.comm, nullptr), kBad);
    EXPECT_RESULT(cclSend(x, 4, bad_type, next_of(ctx), ctx.comm, nullptr), kBad);
    EXPECT_RESULT(cclAllReduce(x, x, 4, bad_type, cclSum, ctx.comm, nullptr), kBad);
    cclGroupEnd();
  }
  EXPECT_RESULT(cclGroupEnd(), cclInvalidUsage);
  // A balanced pair, then one end too many.
  if (EXPECT_RESULT(cclGroupStart(), cclSuccess)) EXPECT_RESULT(cclGroupEnd(), cclSuccess);
  EXPECT_RESULT(cclGroupEnd(), cclInvalidUsage);
}

}  // namespace

void run_point_to_point(const Context& ctx) {
  // Groups are probed first: without them, the parts that need a group would deadlock.
  bool groups = EXPECT_RESULT(cclGroupStart(), cclSuccess);
  if (groups) groups = EXPECT_RESULT(cclGroupEnd(), cclSuccess);
  check_errors(ctx, groups);
  check_ungrouped(ctx);
  check_ordered_messages(ctx, false);
  if (!groups) {
    fail("groups unavailable: grouped send/recv checks skipped");
    return;
  }
  for (size_t count : {size_t{1}, size_t{7}, size_t{1003}, size_t{1000003}}) {
    check_ring(ctx, count == 1003 ? cclFloat8e5m2 : cclFloat32, count, nullptr);
  }
  check_ring(ctx, cclBfloat16, 65537, ctx.stream);
  check_opposite_order(ctx, 7);
  check_opposite_order(ctx, 300007);
  check_ordered_messages(ctx, true);
  check_self(ctx);
  check_mixed(ctx);
  check_nested(ctx);
  check_any_source(ctx);
  check_ring(ctx, cclInt64, 7, nullptr);  // the state after all of the above is clean
}

}  // namespace ccl::set_check
