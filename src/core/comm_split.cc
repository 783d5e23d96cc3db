// cclCommSplit. The parent communicator itself carries the exchange: an allgather of every rank's
// (color, key), then the lowest-ordered rank of each color opens a rendezvous for its group (a
// store server, as cclGetUniqueId does, or for loopback communicators an in-process store and
// fabric) and a second allgather hands its address to the group, whose members then join a new
// communicator through it like cclCommInitRank.
#include <algorithm>
#include <array>
#include <cstring>

#include "core/bootstrap/tcp_store.h"
#include "core/bootstrap/unique_id.h"
#include "core/comm.h"
#include "core/error.h"
#include "core/log.h"
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

}  // namespace

std::shared_ptr<Communicator> Communicator::split(int color, int key, const CommOptions& options) {
  // 1. Everyone's (color, key): the members of this rank's group, ordered by (key, parent rank).
  const int64_t mine[2] = {color, key};
  std::vector<int64_t> everyone(2 * static_cast<size_t>(nranks_));
  all_gather(mine, everyone.data(), 2, cclInt64);
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r) {
    if (everyone[2 * r] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return everyone[2 * a + 1] < everyone[2 * b + 1]; });
  const bool joins = color != CCL_SPLIT_NOCOLOR;
  const int leader = members.front();
  const int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  const int new_size = static_cast<int>(members.size());

  // 2. Each group's leader opens its rendezvous; everyone learns the leaders' addresses.
  RendezvousAddress address{};
  std::unique_ptr<StoreServer> server;
  std::shared_ptr<LoopbackRendezvous> loopback;
  if (joins && rank_ == leader) {
    if (options_.loopback) {
      loopback = std::make_shared<LoopbackRendezvous>();
      loopback->fabric = std::make_shared<transport::LoopbackFabric>(new_size);
      const uintptr_t pointer = reinterpret_cast<uintptr_t>(loopback.get());
      memcpy(address.data(), &pointer, sizeof(pointer));
    } else {
      UniqueIdContents contents;
      contents.secret = random_secret();
      server = StoreServer::start(choose_interface().address, contents.secret, options.timeout);
      contents.root = server->address();
      const cclUniqueId id = encode_unique_id(contents);
      memcpy(address.data(), id.internal, kAddressBytes);
    }
  }
  std::vector<uint8_t> addresses(kAddressBytes * static_cast<size_t>(nranks_));
  all_gather(address.data(), addresses.data(), kAddressBytes, cclUint8);

  // 3. The members join their group's communicator.
  std::shared_ptr<Communicator> child;
  if (joins) {
    CommOptions child_options = options;
    child_options.rank = new_rank;
    child_options.nranks = new_size;
    const uint8_t* theirs = addresses.data() + kAddressBytes * static_cast<size_t>(leader);
    if (options_.loopback) {
      uintptr_t pointer = 0;
      memcpy(&pointer, theirs, sizeof(pointer));
      // The leader holds the rendezvous until the parent barrier below, so it is alive here.
      std::shared_ptr<LoopbackRendezvous> rendezvous =
          reinterpret_cast<LoopbackRendezvous*>(pointer)->shared_from_this();
      child_options.loopback = rendezvous->fabric;
      child = create(child_options, rendezvous->store);
    } else {
      cclUniqueId id;
      memcpy(id.internal, theirs, kAddressBytes);
      const UniqueIdContents contents = decode_unique_id(id);
      auto store = TcpStore::connect(contents.root, contents.secret, new_rank, new_size,
                                     Deadline::after(child_options.timeout), &abort_);
      child = create(child_options, *store);
    }
    // The members leave the store right after joining; the server stops once all have left.
    if (server) server->wait_finished(Deadline::after(child_options.timeout));
    CCL_INFO(kInit, "split: rank %d of the parent is rank %d of %d with color %d", rank_, new_rank,
             new_size, color);
  }
  // No leader gives up its rendezvous before every member is done with it.
  barrier();
  return child;
}

}  // namespace ccl
