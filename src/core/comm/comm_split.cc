// cclCommSplit. The parent communicator itself carries the exchange: an allgather of every rank's
// (color, key), then the lowest-ordered rank of each color opens a rendezvous for its group (a
// store server, as cclGetUniqueId does, or for loopback communicators an in-process store and
// fabric) and a second allgather hands its address to the group, whose members then join a new
// communicator through it like cclCommInitRank: at once, or with a non-blocking config in the
// new communicator's background, as cclCommInitRankConfig does.
#include <algorithm>
#include <array>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap/tcp_store.h"
#include "core/bootstrap/unique_id.h"
#include "core/comm/comm.h"
#include "transport/loopback/loopback_transport.h"

namespace ccl {

namespace {

// The rendezvous of a loopback group: shared by the threads that are its ranks.
struct LoopbackRendezvous : std::enable_shared_from_this<LoopbackRendezvous> {
  InMemoryStore store;
  std::shared_ptr<transport::LoopbackFabric> fabric;
};

constexpr size_t kAddressBytes = CCL_UNIQUE_ID_BYTES;
using RendezvousAddress = std::array<uint8_t, kAddressBytes>;

// This rank's place after the exchange over the parent.
struct SplitGroup {
  bool joins = false;  // false for CCL_SPLIT_NOCOLOR
  int rank = 0;        // in the new communicator
  int size = 0;
  RendezvousAddress address{};                   // the group leader's rendezvous
  std::shared_ptr<LoopbackRendezvous> loopback;  // loopback groups: held by every member
};

// The leader's loopback rendezvous, its address the pointer (the ranks share one process).
std::shared_ptr<LoopbackRendezvous> open_loopback(int size, RendezvousAddress& address) {
  auto rendezvous = std::make_shared<LoopbackRendezvous>();
  rendezvous->fabric = std::make_shared<transport::LoopbackFabric>(size);
  const uintptr_t pointer = reinterpret_cast<uintptr_t>(rendezvous.get());
  memcpy(address.data(), &pointer, sizeof(pointer));
  return rendezvous;
}

// The leader's store server, its address a unique id. The server is adopted: it stays up until
// every member has joined and left (or its timeout), whether they join now or in the background.
void open_store_server(std::chrono::milliseconds timeout, RendezvousAddress& address) {
  const cclUniqueId id = start_adopted_rendezvous(timeout);
  memcpy(address.data(), id.internal, kAddressBytes);
}

}  // namespace

std::shared_ptr<Communicator> Communicator::split(int color, int key, const CommOptions& options) {
  // A non-blocking parent's queued operations come first, on every rank, as the caller ordered.
  drain_background();

  // 1. Everyone's (color, key): the members of this rank's group, ordered by (key, parent rank).
  const int64_t mine[2] = {color, key};
  std::vector<int64_t> everyone(2 * static_cast<size_t>(nranks()));
  run(make_call(OpKind::AllGather, "cclCommSplit", mine, everyone.data(), 2, cclInt64));
  std::vector<int> members;
  for (int r = 0; r < nranks(); ++r) {
    if (everyone[2 * r] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return everyone[2 * a + 1] < everyone[2 * b + 1]; });
  SplitGroup group;
  group.joins = color != CCL_SPLIT_NOCOLOR;
  group.rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  group.size = static_cast<int>(members.size());
  const int leader = members.front();

  // 2. Each group's leader opens its rendezvous; everyone learns the leaders' addresses.
  RendezvousAddress address{};
  if (group.joins && rank() == leader) {
    if (options_.loopback) {
      group.loopback = open_loopback(group.size, address);
    } else {
      open_store_server(options.timeout, address);
    }
  }
  std::vector<uint8_t> addresses(kAddressBytes * static_cast<size_t>(nranks()));
  run(make_call(OpKind::AllGather, "cclCommSplit", address.data(), addresses.data(), kAddressBytes,
                cclUint8));
  memcpy(group.address.data(), addresses.data() + kAddressBytes * static_cast<size_t>(leader),
         kAddressBytes);
  if (options_.loopback) {
    if (group.joins && !group.loopback) {
      uintptr_t pointer = 0;
      memcpy(&pointer, group.address.data(), sizeof(pointer));
      // The leader holds the rendezvous until the barrier below, so it is alive here.
      group.loopback = reinterpret_cast<LoopbackRendezvous*>(pointer)->shared_from_this();
    }
    // Every member holds the rendezvous now; the leader may drop its own reference.
    run(make_call(OpKind::Barrier, "cclCommSplit", nullptr, nullptr, 0, cclUint8));
  }
  if (!group.joins) return nullptr;

  // 3. The members join their group's communicator: now, or in its background.
  CommOptions child_options = options;
  child_options.rank = group.rank;
  child_options.nranks = group.size;
  StoreConnector connect;
  if (group.loopback) {
    child_options.loopback = group.loopback->fabric;
    connect = [rendezvous = group.loopback](Deadline, const AbortFlag*) {
      return std::unique_ptr<Store>(std::make_unique<PrefixStore>("", rendezvous->store));
    };
  } else {
    cclUniqueId id;
    memcpy(id.internal, group.address.data(), kAddressBytes);
    connect = AsyncState::through_unique_id(id, group.rank, group.size);
  }
  CCL_INFO(kInit, "split: rank %d of the parent is rank %d of %d with color %d%s", rank(),
           group.rank, group.size, color,
           child_options.blocking ? "" : " (joins in the background)");
  if (!child_options.blocking) return create_async(child_options, std::move(connect));
  // The parent's abort flag: cclCommAbort on the parent releases a join that hangs.
  std::unique_ptr<Store> store =
      connect(Deadline::after(child_options.timeout), &status_.abort_flag());
  return create(child_options, *store);
}

}  // namespace ccl
