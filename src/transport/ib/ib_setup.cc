#include "transport/ib/ib_setup.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap/store.h"

namespace ccl::transport::ib {
namespace {

// The store is asked in slices so that an abort is noticed while a peer is late.
constexpr auto kStoreSlice = std::chrono::milliseconds(100);

std::string record_key(const std::string& tag, int from, int to) {
  return tag + "/ib/" + std::to_string(from) + "/" + std::to_string(to);
}

std::vector<uint8_t> get_from_peer(const SetupContext& ctx, const std::string& key, int peer) {
  for (;;) {
    if (ctx.abort != nullptr && ctx.abort->load()) {
      throw_peer_error(cclRemoteError, peer, "ib: setup aborted while waiting for rank %d", peer);
    }
    const auto slice = std::min(ctx.deadline.at(), Clock::now() + kStoreSlice);
    try {
      return ctx.store->get(key, Deadline(slice));
    } catch (const Error& e) {
      if (e.code() != cclTimeout) throw;
      if (ctx.deadline.expired()) {
        throw_peer_error(cclTimeout, peer, "ib: rank %d timed out waiting for rank %d's '%s'",
                         ctx.rank, peer, key.c_str());
      }
    }
  }
}

void check_record(const EndpointInfo& remote, const SetupContext& ctx, int peer,
                  const IbDevice& device, const IbSetupOptions& options) {
  if (remote.rank != peer || remote.peer != ctx.rank) {
    throw_peer_error(cclRemoteError, peer, "ib: rank %d's connection record names ranks %d->%d",
                     peer, remote.rank, remote.peer);
  }
  if (static_cast<int>(remote.qpn.size()) != options.qps) {
    throw_peer_error(cclInvalidUsage, peer,
                     "ib: rank %d uses %zu QPs per connection, rank %d uses %d "
                     "(CCL_IB_QPS_PER_CONNECTION must be equal on every rank)",
                     peer, remote.qpn.size(), ctx.rank, options.qps);
  }
  if ((remote.ethernet != 0) != device.port().ethernet) {
    throw_peer_error(cclInvalidUsage, peer,
                     "ib: rank %d's port is %s, rank %d's (%s) is %s: they cannot connect", peer,
                     remote.ethernet ? "RoCE" : "InfiniBand", ctx.rank,
                     device.port().describe().c_str(),
                     device.port().ethernet ? "RoCE" : "InfiniBand");
  }
}

}  // namespace

std::map<int, std::unique_ptr<IbConnection>> establish(const SetupContext& ctx, IbDevice& device,
                                                       IbRegCache& cache,
                                                       std::span<const int> peers,
                                                       const IbSetupOptions& options) {
  std::map<int, std::unique_ptr<IbConnection>> made;
  for (int peer : peers) {
    auto conn = std::make_unique<IbConnection>(ctx.rank, peer, device, cache, options.qps,
                                               options.connection);
    ctx.store->set(record_key(ctx.comm_tag, ctx.rank, peer),
                   encode_endpoint(conn->link().local_info(ctx.rank, peer)));
    made.emplace(peer, std::move(conn));
  }
  for (int peer : peers) {
    const EndpointInfo remote =
        decode_endpoint(get_from_peer(ctx, record_key(ctx.comm_tag, peer, ctx.rank), peer));
    check_record(remote, ctx, peer, device, options);
    made.at(peer)->link().connect(remote, options.timeouts);
    ctx.store->set(record_key(ctx.comm_tag, ctx.rank, peer) + "/ready", to_bytes("1"));
  }
  for (int peer : peers) {
    get_from_peer(ctx, record_key(ctx.comm_tag, peer, ctx.rank) + "/ready", peer);
    CCL_INFO(kNet | kInit, "ib: rank %d connected to rank %d over %s (%d QP%s)", ctx.rank, peer,
             device.port().describe().c_str(), options.qps, options.qps == 1 ? "" : "s");
  }
  return made;
}

}  // namespace ccl::transport::ib
