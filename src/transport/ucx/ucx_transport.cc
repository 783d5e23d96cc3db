#include "transport/ucx/ucx_transport.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "transport/failure_notice.h"
#include "transport/peer_list.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_memory.h"
#include "transport/ucx/ucx_options.h"
#include "transport/ucx/ucx_setup.h"
#include "transport/ucx/ucx_worker.h"

namespace ccl::transport {
namespace ucx {
namespace {

using namespace std::chrono;

// wait() sleeps in slices: it notices the abort flag without an interrupt(), and UCX's keepalive
// (which finds peers that died without closing a socket) runs only inside ucp_worker_progress.
constexpr microseconds kWaitSlice = milliseconds(100);
// The destructor's bounds: for the goodbyes to leave and the endpoints to flush, then for the
// forced closes.
constexpr milliseconds kGoodbyeTimeout{200};
constexpr milliseconds kCloseTimeout{200};

class UcxTransport final : public Transport {
 public:
  UcxTransport(const SetupContext& ctx, const UcxOptions& options)
      : options_(options),
        rank_(ctx.rank),
        nranks_(ctx.nranks),
        comm_tag_(ctx.comm_tag),
        abort_(ctx.abort),
        worker_(ctx.nranks - 1),
        memory_(worker_.context()) {
    wakeup_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeup_fd_ < 0) throw_system_error(errno, "ucx: eventfd");
  }

  // Never throws (sleep_on_worker does not; the connections' teardown steps do not).
  ~UcxTransport() override {
    for (auto& [peer, conn] : connections_) conn->begin_shutdown();
    const Deadline goodbyes = Deadline::after(kGoodbyeTimeout);
    for (;;) {
      bool all = true;
      for (auto& [peer, conn] : connections_) all &= conn->shutdown_flushed();
      if (all || goodbyes.expired()) break;
      if (!worker_.progress()) sleep_on_worker(milliseconds(1));
    }
    std::vector<PendingOp> closing;
    for (auto& [peer, conn] : connections_) closing.push_back(conn->close_endpoint());
    const Deadline deadline = Deadline::after(kCloseTimeout);
    for (;;) {
      bool all = true;
      for (PendingOp& op : closing) all &= !op.active() || op.done();
      if (all) break;
      if (deadline.expired()) {
        CCL_WARN(kNet, "ucx: rank %d: endpoints still closing after %lld ms", rank_,
                 static_cast<long long>(kCloseTimeout.count()));
        break;
      }
      if (!worker_.progress()) sleep_on_worker(milliseconds(1));
    }
    closing.clear();
    for (auto& [peer, conn] : connections_) conn->release_requests();
    // Requests still held by UCX die with the worker; only then may their buffers go.
    worker_.destroy_worker();
    connections_.clear();
    retired_.clear();
    ::close(wakeup_fd_);
  }

  const char* name() const override { return "ucx"; }

  std::vector<Connection*> connect(const SetupContext& ctx, std::span<const int> peers) override {
    std::vector<int> fresh = peers_to_connect("ucx", ctx, rank_, nranks_, comm_tag_, peers,
                                              [&](int p) { return connections_.count(p) != 0; });
    publish_address(ctx, worker_, &published_);
    for (auto& conn : connect_peers(ctx, worker_, fresh, options_, retired_)) {
      const int peer = conn->peer();
      connections_.emplace(peer, std::move(conn));
    }
    std::vector<Connection*> result;
    for (int p : peers) result.push_back(connections_.at(p).get());
    return result;
  }

  bool needs_idle_progress() override { return !worker_.settled(); }
  void progress_idle() override { worker_.settle(); }

  void wait(microseconds timeout) override {
    // Elapsed time against `timeout` (not now() + timeout, which overflows for "forever").
    const auto start = steady_clock::now();
    for (;;) {
      if (abort_ != nullptr && abort_->load()) return;
      const bool progressed = worker_.progress();
      check_connections();
      if (progressed) return;
      const auto left = timeout - duration_cast<microseconds>(steady_clock::now() - start);
      if (left <= microseconds(0)) return;
      if (!worker_.arm()) {
        // Events arrived since the last progress, which moved nothing (else it returned): give
        // the CPU away before trying again rather than spin on a worker that stays busy.
        sched_yield();
        continue;
      }
      const auto slice = std::min(left, kWaitSlice);
      pollfd fds[2] = {{worker_.event_fd(), POLLIN, 0}, {wakeup_fd_, POLLIN, 0}};
      const timespec ts{static_cast<time_t>(slice.count() / 1000000),
                        static_cast<long>(slice.count() % 1000000) * 1000};
      const int ready = ::ppoll(fds, 2, &ts, nullptr);
      if (ready < 0) {
        if (errno == EINTR) return;
        throw_system_error(errno, "ucx: poll");
      }
      if (fds[1].revents != 0) {
        uint64_t count;
        [[maybe_unused]] ssize_t n = ::read(wakeup_fd_, &count, sizeof(count));
        return;
      }
      if (ready > 0) {
        worker_.progress();
        check_connections();
        return;
      }
    }
  }

  void interrupt() override {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wakeup_fd_, &one, sizeof(one));
  }

  void notify_failure(const FailureNotice& notice) override {
    const NoticeWire wire{
        kNoticeMagic, notice.kind, notice.code, notice.origin, notice.culprit, 0, 0};
    for (auto& [peer, conn] : connections_) conn->send_notice(wire);
    worker_.progress();  // push them out; best effort
    for (auto& [peer, conn] : connections_) conn->close_after_failure();
  }

  void collect_notices(std::vector<std::pair<int, FailureNotice>>& out) override {
    worker_.progress();
    for (auto& [peer, conn] : connections_) {
      conn->poll_notice();
      if (auto notice = conn->failure_notice()) out.emplace_back(peer, *notice);
    }
  }

  void check_health() override {
    worker_.progress();
    for (auto& [peer, conn] : connections_) {
      if (conn->busy()) continue;
      if (conn->poll_notice()) {
        if (conn->departed()) continue;  // a goodbye: the peer left cleanly
        conn->fail_with_notice();
      }
      if (conn->endpoint_failed()) {
        throw_peer_error(cclRemoteError, peer,
                         "ucx: rank %d closed its connection without a word (%s)", peer,
                         ucs_status_string(conn->endpoint_status()));
      }
    }
  }

  void register_memory(RegisteredRegion& region) override { memory_.add(region); }
  void deregister_memory(const RegisteredRegion& region) override { memory_.remove(region); }

 private:
  // After a progress: a busy connection whose peer failed or vanished throws; an idle one only
  // for a kFailed notice (an abort, a goodbye or a crash of a peer this wait does not need is
  // left to the operation that needs it, and to check_health).
  void check_connections() {
    for (auto& [peer, conn] : connections_) {
      if (conn->busy()) {
        if (conn->failed() || conn->endpoint_failed() || conn->poll_notice()) conn->advance();
      } else if (conn->take_unreported_failure()) {
        conn->fail_with_notice();
      }
    }
  }

  // The destructor's sleep: never throws (an arm that fails just ends the sleep).
  void sleep_on_worker(milliseconds slice) noexcept {
    if (worker_.try_arm() != UCS_OK) return;
    pollfd fd{worker_.event_fd(), POLLIN, 0};
    ::poll(&fd, 1, static_cast<int>(slice.count()));
  }

  UcxOptions options_;
  int rank_;
  int nranks_;
  std::string comm_tag_;
  const AbortFlag* abort_;
  UcxWorker worker_;
  MemoryRegistry memory_;  // before worker_ goes: unmaps against its context
  int wakeup_fd_ = -1;     // eventfd for interrupt()
  bool published_ = false;
  std::map<int, std::unique_ptr<UcxConnection>> connections_;
  // Connections of a connect() that failed, torn down already: kept until the worker is gone,
  // which may still call their error handlers and write their buffers (ucx_setup.h).
  std::vector<std::unique_ptr<UcxConnection>> retired_;
};

}  // namespace

std::unique_ptr<Transport> make_ucx_transport(const SetupContext& ctx, const UcxOptions& options) {
  if (ctx.nranks < 1 || ctx.rank < 0 || ctx.rank >= ctx.nranks) {
    throw_error(cclInvalidArgument, "ucx: rank %d of %d", ctx.rank, ctx.nranks);
  }
  if (ctx.nranks > kMaxRanks) {
    throw_error(cclInvalidArgument, "ucx: %d ranks, the transport's tags name at most %d",
                ctx.nranks, kMaxRanks);
  }
  return std::make_unique<UcxTransport>(ctx, options);
}

}  // namespace ucx

std::unique_ptr<Transport> make_ucx_transport(const SetupContext& ctx) {
  return ucx::make_ucx_transport(ctx, ucx::UcxOptions{});
}

}  // namespace ccl::transport
