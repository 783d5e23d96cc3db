#include "transport/ib/ib_transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/failure_notice.h"
#include "transport/ib/ib_connection.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_devices.h"
#include "transport/ib/ib_reg_cache.h"
#include "transport/ib/ib_setup.h"
#include "transport/peer_list.h"
#include "transport/registered_region.h"

namespace ccl::transport {
namespace {

using namespace std::chrono;
using ib::IbConnection;

// wait() sleeps in slices so that it notices the abort flag without an interrupt().
constexpr microseconds kWaitSlice = milliseconds(100);
// A busy connection with no completion for this long sends a probe (IbConnection).
constexpr auto kProbeQuiet = seconds(1);
// How long a destroyed transport lets its goodbyes go out before it tears the QPs down.
constexpr auto kGoodbyeWait = milliseconds(100);
// How long notify_failure() lets its notices complete before it shuts the QPs.
constexpr auto kNoticeWait = milliseconds(20);

ib::IbSetupOptions setup_options_from_config() {
  ib::IbSetupOptions o;
  const int64_t qps = config_int("CCL_IB_QPS_PER_CONNECTION");
  if (qps < 1 || qps > ib::kMaxQpsPerConnection) {
    throw_error(cclInvalidUsage, "CCL_IB_QPS_PER_CONNECTION=%lld: expected 1..%d",
                static_cast<long long>(qps), ib::kMaxQpsPerConnection);
  }
  o.qps = static_cast<int>(qps);
  o.timeouts = ib::qp_timeouts_from_config();
  // A quarter of the per-connection buffering per write and bounce slot: four slots keep the
  // receiver's consume() and the next segment's arrival overlapped. At least a page, and well
  // under the 4 GiB a scatter entry can describe.
  const int64_t buffsize = config_int("CCL_BUFFSIZE");
  size_t chunk = static_cast<size_t>(std::max<int64_t>(buffsize, 0)) / o.connection.bounce_slots;
  chunk = std::clamp<size_t>(chunk / kPieceAlign * kPieceAlign, 4096, size_t(1) << 30);
  o.connection.chunk_bytes = chunk;
  return o;
}

// Among several usable ports, rank i of a host takes port i modulo their count.
size_t local_index(const SetupContext& ctx) {
  if (ctx.rank < 0 || static_cast<size_t>(ctx.rank) >= ctx.peers.size()) return 0;
  size_t index = 0;
  for (int r = 0; r < ctx.rank; ++r) {
    if (ctx.peers[r].host_id == ctx.peers[ctx.rank].host_id) ++index;
  }
  return index;
}

class IbTransport final : public Transport {
 public:
  IbTransport(const SetupContext& ctx, const ib::VerbsApi& api, ib::IbPort port,
              const ib::IbSetupOptions& options)
      : rank_(ctx.rank),
        nranks_(ctx.nranks),
        comm_tag_(ctx.comm_tag),
        abort_(ctx.abort),
        options_(options),
        device_(api, std::move(port)),
        cache_(api, device_.pd(), ib::user_buffer_cache_entries()) {
    wakeup_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeup_ < 0) throw_system_error(errno, "ib: eventfd");
  }

  ~IbTransport() override {
    if (!notified_) {
      for (auto& [peer, conn] : connections_) conn->send_goodbye();
    }
    const Deadline deadline = Deadline::after(duration_cast<milliseconds>(kGoodbyeWait));
    for (auto& [peer, conn] : connections_) {
      while (!conn->notice_settled() && !deadline.expired()) std::this_thread::yield();
    }
    connections_.clear();
    {
      std::lock_guard<std::mutex> lock(regions_mutex_);
      for (auto& [id, mr] : regions_) device_.api().dereg_mr(mr);
    }
    ::close(wakeup_);
  }

  const char* name() const override { return "ib"; }

  std::vector<Connection*> connect(const SetupContext& ctx, std::span<const int> peers) override {
    std::vector<int> fresh = peers_to_connect("ib", ctx, rank_, nranks_, comm_tag_, peers,
                                              [&](int p) { return connections_.count(p) != 0; });
    auto made = ib::establish(ctx, device_, cache_, fresh, options_);
    for (auto& [peer, conn] : made) connections_.emplace(peer, std::move(conn));
    std::vector<Connection*> result;
    for (int p : peers) result.push_back(connections_.at(p).get());
    return result;
  }

  void wait(microseconds timeout) override {
    const auto start = steady_clock::now();
    for (;;) {
      if (abort_ != nullptr && abort_->load()) return;
      poll_all();
      rethrow_failures();
      if (any_ready()) return;
      if (throw_notices()) return;  // nothing left to take: a failed peer fails the wait
      for (auto& [peer, conn] : connections_) conn->link().arm();
      if (poll_all()) continue;  // a completion came before the CQs were armed
      const auto left = timeout - duration_cast<microseconds>(steady_clock::now() - start);
      if (left <= microseconds(0)) return;
      const auto slice = std::min(left, kWaitSlice);
      pollfd fds[2] = {{device_.channel()->fd, POLLIN, 0}, {wakeup_, POLLIN, 0}};
      timespec ts{static_cast<time_t>(slice.count() / 1000000),
                  static_cast<long>(slice.count() % 1000000) * 1000};
      int ready = ::ppoll(fds, 2, &ts, nullptr);
      if (ready < 0) {
        if (errno == EINTR) return;
        throw_system_error(errno, "ib: poll");
      }
      drain_channel();
      for (auto& [peer, conn] : connections_) conn->probe_if_quiet(kProbeQuiet);
      if (fds[1].revents != 0) {
        uint64_t count;
        [[maybe_unused]] ssize_t n = ::read(wakeup_, &count, sizeof(count));
        return;
      }
      if (ready > 0) continue;  // take the completions, then return
      if (duration_cast<microseconds>(steady_clock::now() - start) >= timeout) return;
    }
  }

  void interrupt() override {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wakeup_, &one, sizeof(one));
  }

  void notify_failure(const FailureNotice& notice) override {
    notified_ = true;
    for (auto& [peer, conn] : connections_) conn->send_notice(notice);
    // Then no peer may write into this rank's buffers any more: once the notices are out (a
    // short bounded wait) every QP goes to ERR.
    const Deadline deadline = Deadline::after(duration_cast<milliseconds>(kNoticeWait));
    for (auto& [peer, conn] : connections_) conn->shut_down(deadline);
  }

  void collect_notices(std::vector<std::pair<int, FailureNotice>>& out) override {
    poll_all();
    for (auto& [peer, conn] : connections_) {
      if (conn->peer_notice()) out.emplace_back(peer, *conn->peer_notice());
    }
  }

  void check_health() override {
    poll_all();
    for (auto& [peer, conn] : connections_) {
      if (conn->peer_notice()) throw_notice(*conn->peer_notice(), peer);
    }
    for (auto& [peer, conn] : connections_) {
      if (conn->failed() && !conn->peer_departed()) {
        conn->shut_down(Deadline::after(duration_cast<milliseconds>(kNoticeWait)));
        throw conn->error();
      }
    }
    // A peer that vanished shows only when something is sent to it: a quiet connection gets a
    // probe, whose failure a later check (or wait) reports.
    for (auto& [peer, conn] : connections_) conn->probe_if_quiet(kProbeQuiet, /*idle_too=*/true);
  }

  void register_memory(RegisteredRegion& region) override {
    ibv_mr* mr = nullptr;
    if (region.kind == MemoryKind::CudaDevice) {
      // GPUDirect RDMA: the NIC reads and writes the GPU's memory through its dmabuf. Without
      // one (an old driver or library, no peer-memory support) no key: the region is staged.
      const auto& api = device_.api();
      if (region.dmabuf_fd < 0 || api.reg_dmabuf_mr == nullptr) {
        CCL_INFO(kNet, "ib: device memory at %#llx not registered (%s): staged through the host",
                 static_cast<unsigned long long>(region.base),
                 region.dmabuf_fd < 0 ? "the CUDA driver gave no dmabuf"
                                      : "the verbs library has no ibv_reg_dmabuf_mr");
        return;
      }
      mr = api.reg_dmabuf_mr(device_.pd(), 0, region.bytes, region.base, region.dmabuf_fd,
                             ib::IbRegCache::kRemoteWrite);
    } else if (is_host_memory(region.kind)) {
      mr = device_.api().reg_mr(device_.pd(), reinterpret_cast<void*>(region.base), region.bytes,
                                ib::IbRegCache::kRemoteWrite);
    } else {
      return;
    }
    if (mr == nullptr) {
      throw_system_error(errno, "ib: registering %llu bytes at %#llx",
                         static_cast<unsigned long long>(region.bytes),
                         static_cast<unsigned long long>(region.base));
    }
    TransportKey& key = region.add_key("ib");
    key.lkey = mr->lkey;
    key.rkey = mr->rkey;
    std::lock_guard<std::mutex> lock(regions_mutex_);
    regions_[region.id] = mr;
  }

  void deregister_memory(const RegisteredRegion& region) override {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    auto it = regions_.find(region.id);
    if (it == regions_.end()) return;
    device_.api().dereg_mr(it->second);
    regions_.erase(it);
  }

 private:
  bool poll_all() {
    bool any = false;
    for (auto& [peer, conn] : connections_) any |= conn->poll();
    return any;
  }

  // A failure on a connection with requests pending ends the wait (progress() rethrows it).
  void rethrow_failures() {
    for (auto& [peer, conn] : connections_) {
      if (conn->failed() && conn->busy()) conn->progress();
    }
  }

  bool any_ready() const {
    return std::any_of(connections_.begin(), connections_.end(),
                       [](const auto& c) { return c.second->ready(); });
  }

  // failure_notice.h: a peer's failure ends every wait; its abort or goodbye only a wait that
  // needs it (its connection is busy). True if a connection moved instead (what a departed
  // peer wrote before it left).
  bool throw_notices() {
    for (auto& [peer, conn] : connections_) {
      const auto& notice = conn->peer_notice();
      if (notice && (notice->kind == FailureNotice::kFailed || conn->busy())) {
        throw_notice(*notice, peer);
      }
    }
    bool moved = false;
    for (auto& [peer, conn] : connections_) {
      if (conn->peer_departed() && conn->busy()) moved |= conn->progress();  // or throws
    }
    return moved;
  }

  void drain_channel() {
    for (int i = 0; i < 64; ++i) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      if (device_.api().get_cq_event(device_.channel(), &cq, &context) != 0) return;
      device_.api().ack_cq_events(cq, 1);
    }
  }

  const int rank_;
  const int nranks_;
  const std::string comm_tag_;
  const AbortFlag* abort_;
  const ib::IbSetupOptions options_;
  ib::IbDevice device_;
  ib::IbRegCache cache_;
  std::map<int, std::unique_ptr<IbConnection>> connections_;
  int wakeup_ = -1;  // eventfd
  bool notified_ = false;
  std::mutex regions_mutex_;
  std::map<uint64_t, ibv_mr*> regions_;  // register_memory's, by region id
};

}  // namespace

std::unique_ptr<Transport> make_ib_transport(const SetupContext& ctx) {
  if (ctx.nranks < 1 || ctx.rank < 0 || ctx.rank >= ctx.nranks) {
    throw_error(cclInvalidArgument, "ib: rank %d of %d", ctx.rank, ctx.nranks);
  }
  const ib::VerbsApi& api = ib::verbs_api_or_throw();
  const ib::IbSetupOptions options = setup_options_from_config();
  const ib::PortScan scan = ib::scan_ports(api, ib::parse_hca_filter(config_string("CCL_IB_HCA")),
                                           ib::gid_policy_from_config(), ib::ib_sysfs_root());
  if (scan.ports.empty()) throw_error(cclSystemError, "ib: %s", ib::why_no_port(scan).c_str());
  const ib::IbPort& port = scan.ports[local_index(ctx) % scan.ports.size()];
  CCL_INFO(kNet | kInit, "ib: rank %d uses %s", ctx.rank, port.describe().c_str());
  return std::make_unique<IbTransport>(ctx, api, port, options);
}

}  // namespace ccl::transport
