#include "core/comm/peers.h"

#include <sched.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "base/int_ranges.h"
#include "base/log.h"
#include "core/comm/transport_choice.h"
#include "core/recovery/recovery_listener.h"
#include "topology/host_id.h"
#include "transport/loopback/loopback_transport.h"
#include "transport/network_transports.h"
#include "transport/shm/shm_transport.h"

namespace ccl {

namespace {

std::string random_tag() {
  uint8_t bytes[6];
  if (getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    throw_system_error(errno, "getrandom");
  }
  char hex[16];
  for (size_t i = 0; i < sizeof(bytes); ++i) snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return hex;
}

// A rank's record at the rendezvous: host id, "pid cuda=0|1 recovery=ADDRESS" (whether a CUDA
// context was current where it made the communicator, and where its process's recovery listener
// is, "-" for none) and locality key, a line each.
std::string encode_peer(const transport::PeerInfo& p, const topo::RankPlace& place,
                        bool cuda_context, const std::string& recovery) {
  return p.host_id + "\n" + std::to_string(p.pid) + (cuda_context ? " cuda=1" : " cuda=0") +
         " recovery=" + recovery + "\n" + encode_locality(place.locality);
}

// The recovery listener's address in a record's second line (port 0: none).
SocketAddress decode_recovery(const std::string& line) {
  const size_t at = line.find(" recovery=");
  if (at == std::string::npos) return SocketAddress{};
  const std::string address = line.substr(at + 10);
  if (address == "-") return SocketAddress{};
  return SocketAddress::parse(address);
}

// This process's recovery listener ("-" where it cannot listen: recovery is then refused).
std::string recovery_address_here() {
  try {
    return recovery::Listener::instance().address().to_string();
  } catch (const Error& e) {
    CCL_WARN(kInit, "no recovery listener (revoke, agree and shrink will fail): %s", e.what());
    return "-";
  }
}

transport::PeerInfo decode_peer(int rank, const std::string& text, topo::RankPlace* place,
                                bool* cuda_context, SocketAddress* recovery) {
  transport::PeerInfo p;
  p.rank = rank;
  const size_t nl = text.find('\n');
  const size_t nl2 = nl == std::string::npos ? nl : text.find('\n', nl + 1);
  if (nl2 == std::string::npos) throw_error(cclInternalError, "bad peer record of rank %d", rank);
  p.host_id = text.substr(0, nl);
  p.pid = atoi(text.c_str() + nl + 1);
  *cuda_context = text.substr(nl + 1, nl2 - nl - 1).find("cuda=1") != std::string::npos;
  *recovery = decode_recovery(text.substr(nl + 1, nl2 - nl - 1));
  place->host = p.host_id;
  place->locality = decode_locality(text.substr(nl2 + 1));
  return p;
}

// What this rank offers its network peers (transport_choice.h), each probe's answer logged.
std::vector<std::string> net_offer_here(int rank) {
  const NetPolicy policy = parse_net_policy(config_string("CCL_NET"));
  const std::vector<NetCandidate> candidates = probe_network_transports(policy);
  for (const NetCandidate& c : candidates) {
    const transport::NetAvailability& a = c.availability;
    CCL_INFO(kNet, "rank %d: %s %s: %s", rank, c.name.c_str(),
             a.available ? (a.by_default || policy.is_list() ? "usable" : "usable when asked for")
                         : "not available",
             a.detail.c_str());
  }
  return net_offer(policy, candidates);
}

}  // namespace

Peers::Peers(const CommOptions& options, const AbortFlag* abort)
    : options_(options), abort_(abort) {}

void Peers::connect(Store& store, const std::function<void()>& ready_here) {
  connect_peers(store, ready_here);
  choose_wait_policy();
  executor_ = std::make_unique<algo::Executor>(links_, wait_policy_, abort_);
  for (auto& t : transports_) transport_list_.push_back(t.get());
  registrations_ = std::make_unique<RegistrationCache>(options_.rank, transport_list_);
  for (auto& t : transports_) {
    if (transport::SharedWindow* window = t->shared_window()) {
      direct_ = std::make_unique<algo::DirectCollectives>(window, wait_policy_, abort_);
      CCL_INFO(kInit, "rank %d: direct collectives over the %s window up to %zu bytes",
               options_.rank, t->name(), window->capacity());
    }
  }
}

RegistrationCache& Peers::registrations() {
  if (!registrations_) throw_error(cclInvalidUsage, "the communicator is not initialized");
  return *registrations_;
}

const char* Peers::transport_name(int peer) const {
  if (links_.transport.empty()) throw_error(cclInvalidUsage, "the communicator is not initialized");
  if (peer == options_.rank) return "self";
  const transport::Transport* t = links_.transport[static_cast<size_t>(peer)];
  return t != nullptr ? t->name() : "none";
}

CallMemory Peers::resolve_memory(const char* what, const void* input, const void* output) {
  return resolve_call_memory(registrations(), transport_list_, what, input, output);
}

void Peers::connect_peers(Store& store, const std::function<void()>& ready_here) {
  transport::SetupContext ctx;
  try {
    join(store, ready_here, ctx);
  } catch (...) {
    // A rank of this host that died during the setup may have made its segment and not lived to
    // remove it: remove it for it (the ranks whose records were read are known by pid).
    std::vector<int> ranks, pids;
    for (const transport::PeerInfo& p : ctx.peers) {
      if (p.rank != options_.rank && p.pid > 0 && !p.host_id.empty() && p.host_id == host_id()) {
        ranks.push_back(p.rank);
        pids.push_back(p.pid);
      }
    }
    if (!ctx.comm_tag.empty()) transport::remove_segments_of_exited(ctx.comm_tag, ranks, pids);
    throw;
  }
}

void Peers::join(Store& store, const std::function<void()>& ready_here,
                 transport::SetupContext& ctx) {
  const int rank = options_.rank, nranks = options_.nranks;
  Deadline deadline = Deadline::after(options_.timeout);
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.store = &store;
  ctx.deadline = deadline;
  ctx.abort = abort_;

  // Rank 0 names the communicator: the name keys shared-memory segments and store entries.
  // With it, the key of the recovery plane (recovery_wire.h: the tag is no secret), "TAG KEYHEX".
  if (rank == 0) {
    store.set("comm_tag", to_bytes(random_tag() + " " + secret_to_hex(random_secret())));
  }
  const std::string named = to_string(store.get("comm_tag", deadline));
  const size_t space = named.find(' ');
  if (space == std::string::npos || !secret_from_hex(named.substr(space + 1), &recovery_key_)) {
    throw_error(cclInternalError, "the communicator's name '%s' is malformed", named.c_str());
  }
  ctx.comm_tag = named.substr(0, space);
  comm_tag_ = ctx.comm_tag;

  transport::PeerInfo self{rank, host_id(), static_cast<int>(getpid())};
  store.set("peer/" + std::to_string(rank),
            to_bytes(encode_peer(self, local_place(self.host_id), options_.cuda_context,
                                 recovery_address_here())));
  ctx.peers.resize(nranks);
  std::vector<topo::RankPlace> places(nranks);
  cuda_contexts_.assign(nranks, false);
  recovery_listeners_.assign(nranks, SocketAddress{});
  for (int r = 0; r < nranks; ++r) {
    bool cuda = false;
    ctx.peers[r] = decode_peer(r, to_string(store.get("peer/" + std::to_string(r), deadline)),
                               &places[r], &cuda, &recovery_listeners_[r]);
    cuda_contexts_[r] = cuda;
  }
  layout_ = CommLayout::build(places);
  if (!layout_.ring_order.empty()) {
    std::string order;
    for (int r : layout_.ring_order) order += " " + std::to_string(r);
    CCL_INFO(kTopo, "rank %d: ring order%s", rank, order.c_str());
  }

  links_.connection.assign(nranks, nullptr);
  links_.transport.assign(nranks, nullptr);
  auto attach = [&](std::unique_ptr<transport::Transport> t, const std::vector<int>& peers) {
    std::vector<transport::Connection*> conns = t->connect(ctx, peers);
    for (size_t i = 0; i < peers.size(); ++i) {
      links_.connection[peers[i]] = conns[i];
      links_.transport[peers[i]] = t.get();
    }
    CCL_INFO(kInit, "rank %d: %zu peer(s) over %s: %s", rank, peers.size(), t->name(),
             format_int_ranges(peers).c_str());
    transports_.push_back(std::move(t));
  };

  std::vector<int> shm_peers, net_peers, all_peers;
  bool shm_disabled = config_bool("CCL_SHM_DISABLE");
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    all_peers.push_back(r);
    bool same_host = ctx.peers[r].host_id == self.host_id;
    local_ranks_ += same_host;
    (same_host && !shm_disabled ? shm_peers : net_peers).push_back(r);
  }
  local_shm_ = options_.loopback != nullptr || !shm_disabled;
  if (options_.loopback) {
    if (!all_peers.empty())
      attach(transport::make_loopback_transport(options_.loopback, rank), all_peers);
  } else {
    if (!shm_peers.empty()) attach(transport::make_shm_transport(ctx), shm_peers);
    // Every rank attaches its network transports in the one order of network_transports(), so
    // the collective connect() calls cannot wait on each other in a cycle.
    std::vector<std::vector<int>> by_net = choose_networks(store, ctx, net_peers, deadline);
    std::span<const transport::NetworkTransport> nets = transport::network_transports();
    for (size_t i = 0; i < nets.size(); ++i) {
      if (!by_net[i].empty()) attach(nets[i].make(ctx), by_net[i]);
    }
  }
  if (ready_here) ready_here();
  store_barrier(store, "connected", nranks, deadline);
  for (auto& t : transports_) t->setup_done();
}

std::vector<std::vector<int>> Peers::choose_networks(Store& store,
                                                     const transport::SetupContext& ctx,
                                                     const std::vector<int>& net_peers,
                                                     Deadline deadline) {
  std::span<const transport::NetworkTransport> nets = transport::network_transports();
  std::vector<std::vector<int>> by_net(nets.size());
  if (net_peers.empty()) return by_net;
  // Only ranks with a peer across the network probe and publish: the others pay nothing. A rank
  // that cannot offer anything publishes why, so its peers fail at once instead of timing out.
  const std::string key = "net/" + std::to_string(ctx.rank);
  std::vector<std::string> offer;
  try {
    offer = net_offer_here(ctx.rank);
  } catch (const Error& e) {
    store.set(key, to_bytes(std::string("!") + e.what()));
    throw;
  }
  store.set(key, to_bytes(encode_offer(offer)));
  for (int peer : net_peers) {
    const std::string text = to_string(store.get("net/" + std::to_string(peer), deadline));
    if (!text.empty() && text[0] == '!') {
      throw_error(cclInvalidUsage, "rank %d cannot take part: %s", peer, text.c_str() + 1);
    }
    std::vector<std::string> theirs = decode_offer(text);
    std::string choice =
        ctx.rank < peer ? pair_transport(offer, theirs) : pair_transport(theirs, offer);
    if (choice.empty()) {
      throw_error(cclInvalidUsage,
                  "ranks %d (host %s) and %d (host %s) share no network transport: rank %d "
                  "offers %s, rank %d offers %s (CCL_NET)",
                  ctx.rank, ctx.peers[ctx.rank].host_id.c_str(), peer,
                  ctx.peers[peer].host_id.c_str(), ctx.rank, encode_offer(offer).c_str(), peer,
                  encode_offer(theirs).c_str());
    }
    for (size_t i = 0; i < nets.size(); ++i) {
      if (choice == nets[i].name) by_net[i].push_back(peer);
    }
  }
  return by_net;
}

void Peers::choose_wait_policy() {
  // With a core per local rank, polling a little before yielding gives the lowest latency. With
  // more local ranks than cores, a poller only delays the peer it waits for, which needs its
  // core: yield from the start, and longer (measured on 2 cores, 3 and 4 ranks: 8 B allreduce
  // 78 -> 29 us, 4-32 KiB 2-4x faster, large sizes no worse). Explicit settings always win.
  cpu_set_t cpus;
  int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  bool oversubscribed = local_ranks_ > cores;
  auto setting = [&](const char* name, int64_t oversubscribed_value) {
    return std::chrono::microseconds(oversubscribed && !config_is_set(name) ? oversubscribed_value
                                                                            : config_int(name));
  };
  wait_policy_.spin = setting("CCL_SPIN_US", 0);
  wait_policy_.yield = setting("CCL_YIELD_US", 2000);
  CCL_INFO(kInit, "rank %d: %d local rank(s) on %d core(s): spin %lld us, yield %lld us",
           options_.rank, local_ranks_, cores, static_cast<long long>(wait_policy_.spin.count()),
           static_cast<long long>(wait_policy_.yield.count()));
}

void Peers::interrupt() {
  for (auto& t : transports_) t->interrupt();
}

void Peers::notify(const transport::FailureNotice& notice) {
  if (notified_) return;
  notified_ = true;
  for (auto& t : transports_) t->notify_failure(notice);
}

void Peers::check_health() {
  for (auto& t : transports_) t->check_health();
}

void Peers::collect_notices(std::vector<std::pair<int, transport::FailureNotice>>& notices) {
  for (auto& t : transports_) t->collect_notices(notices);
}

}  // namespace ccl
