#include "core/comm.h"

#include <sched.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "core/signal_dump.h"
#include "core/stream.h"
#include "topology/host_id.h"
#include "transport/loopback/loopback_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

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

// A rank's record at the rendezvous: host id, pid and locality key, a line each.
std::string encode_peer(const transport::PeerInfo& p, const topo::RankPlace& place) {
  return p.host_id + "\n" + std::to_string(p.pid) + "\n" + encode_locality(place.locality);
}

transport::PeerInfo decode_peer(int rank, const std::string& text, topo::RankPlace* place) {
  transport::PeerInfo p;
  p.rank = rank;
  const size_t nl = text.find('\n');
  const size_t nl2 = nl == std::string::npos ? nl : text.find('\n', nl + 1);
  if (nl2 == std::string::npos) throw_error(cclInternalError, "bad peer record of rank %d", rank);
  p.host_id = text.substr(0, nl);
  p.pid = atoi(text.c_str() + nl + 1);
  place->host = p.host_id;
  place->locality = decode_locality(text.substr(nl2 + 1));
  return p;
}

}  // namespace

Communicator::Communicator(const CommOptions& options)
    : rank_(options.rank), nranks_(options.nranks), options_(options), async_(options_, status_) {
  check_mode_ = config_bool("CCL_CHECK_MODE");
  const int64_t trace_ops = config_int("CCL_TRACE_BUFFER_SIZE");
  if (trace_ops < 0 || trace_ops > (1 << 20)) {
    throw_error(cclInvalidUsage, "CCL_TRACE_BUFFER_SIZE=%lld must be in [0, 1048576]",
                static_cast<long long>(trace_ops));
  }
  recorder_ = std::make_unique<FlightRecorder>(static_cast<size_t>(trace_ops), options.name,
                                               options.rank, options.nranks);
  pending_observer_.comm = this;
  int64_t chunk = config_int("CCL_CHUNKSIZE");
  if (chunk <= 0) chunk = config_int("CCL_BUFFSIZE") / 4;
  // Chunks are multiples of 64 bytes, so every chunk of every datatype starts element-aligned.
  chunk_bytes_ = std::max<int64_t>(64, chunk / 64 * 64);
}

Communicator::~Communicator() {
  // Joins the init thread and lets the background work finish while every part is alive.
  async_.shutdown();
}

std::shared_ptr<Communicator> Communicator::create(const CommOptions& options, Store& store) {
  std::shared_ptr<Communicator> comm(new Communicator(options));
  comm->init(store);
  return comm;
}

std::shared_ptr<Communicator> Communicator::create_async(const CommOptions& options,
                                                         StoreConnector connect) {
  std::shared_ptr<Communicator> comm(new Communicator(options));
  // The thread uses the communicator, which outlives it: the destructor joins it.
  Communicator* c = comm.get();
  c->async_.start_init(std::move(connect), [c](Store& store) { c->init(store); });
  return comm;
}

void Communicator::init(Store& store) {
  connect_peers(store);
  choose_wait_policy();
  executor_ = std::make_unique<algo::Executor>(links_, wait_policy_, &status_.abort_flag());
  for (auto& t : transports_) {
    if (transport::SharedWindow* window = t->shared_window()) {
      direct_ =
          std::make_unique<algo::DirectCollectives>(window, wait_policy_, &status_.abort_flag());
      CCL_INFO(kInit, "rank %d: direct collectives over the %s window up to %zu bytes", rank_,
               t->name(), window->capacity());
    }
  }
  try {
    setup_tuner();  // runs collectives
  } catch (const Error& e) {
    notify_peers(transport::notice_for(e, rank_));
    throw;
  }
  if (!options_.blocking) async_.open_queue();
  register_recorder(recorder_.get());  // SIGUSR1 dumps it
  CCL_INFO(kInit, "communicator %s rank %d of %d ready", options_.name.c_str(), rank_, nranks_);
}

void Communicator::drain_background() { async_.drain(); }

void Communicator::enqueue_background(std::function<cclResult_t(Communicator&)> work) {
  async_.enqueue([this, work = std::move(work)] {
    const cclResult_t result = work(*this);
    queued_end();
    return result;
  });
}

void Communicator::connect_peers(Store& store) {
  Deadline deadline = Deadline::after(options_.timeout);
  transport::SetupContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.store = &store;
  ctx.deadline = deadline;
  ctx.abort = &status_.abort_flag();

  // Rank 0 names the communicator: the name keys shared-memory segments and store entries.
  if (rank_ == 0) store.set("comm_tag", to_bytes(random_tag()));
  ctx.comm_tag = to_string(store.get("comm_tag", deadline));

  transport::PeerInfo self{rank_, host_id(), static_cast<int>(getpid())};
  store.set("peer/" + std::to_string(rank_),
            to_bytes(encode_peer(self, local_place(self.host_id))));
  ctx.peers.resize(nranks_);
  std::vector<topo::RankPlace> places(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    ctx.peers[r] =
        decode_peer(r, to_string(store.get("peer/" + std::to_string(r), deadline)), &places[r]);
  }
  layout_ = CommLayout::build(places);
  if (!layout_.ring_order.empty()) {
    std::string order;
    for (int r : layout_.ring_order) order += " " + std::to_string(r);
    CCL_INFO(kTopo, "rank %d: ring order%s", rank_, order.c_str());
  }

  links_.connection.assign(nranks_, nullptr);
  links_.transport.assign(nranks_, nullptr);
  auto attach = [&](std::unique_ptr<transport::Transport> t, const std::vector<int>& peers) {
    std::vector<transport::Connection*> conns = t->connect(ctx, peers);
    for (size_t i = 0; i < peers.size(); ++i) {
      links_.connection[peers[i]] = conns[i];
      links_.transport[peers[i]] = t.get();
    }
    CCL_INFO(kInit, "rank %d: %zu peer(s) over %s", rank_, peers.size(), t->name());
    transports_.push_back(std::move(t));
  };

  std::vector<int> shm_peers, tcp_peers, all_peers;
  bool shm_disabled = config_bool("CCL_SHM_DISABLE");
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    all_peers.push_back(r);
    bool same_host = ctx.peers[r].host_id == self.host_id;
    local_ranks_ += same_host;
    (same_host && !shm_disabled ? shm_peers : tcp_peers).push_back(r);
  }
  local_shm_ = options_.loopback != nullptr || !shm_disabled;
  if (options_.loopback) {
    if (!all_peers.empty())
      attach(transport::make_loopback_transport(options_.loopback, rank_), all_peers);
  } else {
    if (!shm_peers.empty()) attach(transport::make_shm_transport(ctx), shm_peers);
    if (!tcp_peers.empty()) attach(transport::make_tcp_transport(ctx), tcp_peers);
  }
  store_barrier(store, "connected", nranks_, deadline);
  for (auto& t : transports_) t->setup_done();
}

void Communicator::choose_wait_policy() {
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
  CCL_INFO(kInit, "rank %d: %d local rank(s) on %d core(s): spin %lld us, yield %lld us", rank_,
           local_ranks_, cores, static_cast<long long>(wait_policy_.spin.count()),
           static_cast<long long>(wait_policy_.yield.count()));
}

}  // namespace ccl
