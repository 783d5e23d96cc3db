#include "transport/tcp/tcp_transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/failure_notice.h"
#include "transport/peer_list.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_multi_connection.h"

namespace ccl::transport {
namespace {

using namespace std::chrono;

// wait() sleeps in slices so that it notices the abort flag without an interrupt().
constexpr microseconds kWaitSlice = milliseconds(100);

class TcpTransport final : public Transport {
 public:
  TcpTransport(const SetupContext& ctx, int nsockets, int nthreads)
      : rank_(ctx.rank),
        nranks_(ctx.nranks),
        comm_tag_(ctx.comm_tag),
        abort_(ctx.abort),
        nsockets_(nsockets),
        nthreads_(nthreads),
        handshake_(ctx.rank, ctx.nranks, ctx.comm_tag, nsockets) {
    int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) throw_system_error(errno, "tcp: eventfd");
    wakeup_ = Socket(fd);  // Socket is only used as an RAII fd here
  }

  const char* name() const override { return "tcp"; }

  std::vector<Connection*> connect(const SetupContext& ctx, std::span<const int> peers) override {
    // A peer connected by an earlier call keeps its connection; both sides know it.
    std::vector<int> fresh =
        peers_to_connect("tcp", ctx, rank_, nranks_, comm_tag_, peers,
                         [&](int p) { return connections_.count(p) != 0 || multi_.count(p) != 0; });
    auto sockets = handshake_.establish(ctx, fresh);
    for (auto& [peer, established] : sockets) {
      CCL_INFO(kNet | kInit, "tcp: rank %d connected to rank %d (%s, %d socket(s), %d thread(s))",
               rank_, peer, established.address.c_str(), nsockets_,
               nsockets_ > 1 && nthreads_ > 1 ? std::min(nthreads_, nsockets_ - 1) : 0);
      if (nsockets_ == 1) {
        connections_.emplace(
            peer, std::make_unique<tcp::TcpConnection>(peer, std::move(established.sockets[0]),
                                                       established.address));
      } else {
        multi_.emplace(peer, std::make_unique<tcp::MultiConnection>(
                                 peer, std::move(established.sockets), established.address,
                                 nthreads_, wakeup_.fd()));
      }
    }
    std::vector<Connection*> result;
    for (int p : peers) {
      auto it = connections_.find(p);
      result.push_back(it != connections_.end() ? static_cast<Connection*>(it->second.get())
                                                : multi_.at(p).get());
    }
    return result;
  }

  void wait(microseconds timeout) override {
    // Elapsed time against `timeout` (not now() + timeout, which overflows for "forever").
    auto start = steady_clock::now();
    std::vector<pollfd>& fds = poll_fds_;
    std::vector<tcp::TcpConnection*>& polled = polled_;
    for (;;) {
      if (abort_ != nullptr && abort_->load()) return;
      fds.clear();
      polled.clear();
      fds.push_back(pollfd{wakeup_.fd(), POLLIN, 0});
      for (auto& [peer, conn] : connections_) {
        if (!conn->busy()) {
          // An idle peer matters only if it fails: its notice (or a crash) ends the wait.
          if (!conn->watch_idle()) continue;
          fds.push_back(pollfd{conn->fd(), POLLRDHUP, 0});
          polled.push_back(conn.get());
          continue;
        }
        if (conn->failed()) conn->progress();  // rethrows its error
        fds.push_back(pollfd{conn->fd(), conn->poll_events(), 0});
        polled.push_back(conn.get());
      }
      multi_polled_.clear();
      for (auto& [peer, conn] : multi_) {
        if (!conn->busy() && !conn->watch_idle()) continue;
        if (conn->busy() && conn->failed()) conn->progress();  // rethrows its error
        const size_t first = fds.size();
        conn->append_polls(fds);
        if (fds.size() > first) multi_polled_.push_back({conn.get(), first, fds.size() - first});
      }
      auto left = timeout - duration_cast<microseconds>(steady_clock::now() - start);
      auto slice = std::clamp(left, microseconds(0), kWaitSlice);
      timespec ts{static_cast<time_t>(slice.count() / 1000000),
                  static_cast<long>(slice.count() % 1000000) * 1000};
      int ready = ::ppoll(fds.data(), fds.size(), &ts, nullptr);
      if (ready < 0) {
        if (errno == EINTR) return;
        throw_system_error(errno, "tcp: poll");
      }
      if (ready > 0) {
        if (fds[0].revents != 0) {
          uint64_t count;
          [[maybe_unused]] ssize_t n = ::read(wakeup_.fd(), &count, sizeof(count));
        }
        // A hang-up or error: let the connection drain what already arrived, then throw if
        // requests are still pending on it.
        for (size_t i = 0; i < polled.size(); ++i) {
          if (!(fds[i + 1].revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL))) continue;
          if (polled[i]->busy()) {
            polled[i]->progress();
          } else {
            // A failure notice throws; an abort, a goodbye or a crash of a peer this operation
            // does not need is left to the operation that needs it (and to check_health).
            polled[i]->idle_peer_gone(/*abort_fails=*/false);
            polled[i]->set_idle_closed();
          }
        }
        for (const MultiPolled& m : multi_polled_) m.conn->after_poll(&fds[m.first], m.count);
        return;
      }
      if (duration_cast<microseconds>(steady_clock::now() - start) >= timeout) return;
    }
  }

  void interrupt() override {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wakeup_.fd(), &one, sizeof(one));
  }

  void setup_done() override { handshake_.stop_listening(); }

  void notify_failure(const FailureNotice& notice) override {
    for (auto& [peer, conn] : connections_) conn->send_notice(notice);
    for (auto& [peer, conn] : multi_) conn->send_notice(notice);
  }

  void collect_notices(std::vector<std::pair<int, FailureNotice>>& out) override {
    for (auto& [peer, conn] : connections_) {
      if (auto notice = conn->peek_notice()) out.emplace_back(peer, *notice);
    }
    for (auto& [peer, conn] : multi_) {
      if (auto notice = conn->peek_notice()) out.emplace_back(peer, *notice);
    }
  }

  void check_health() override {
    std::vector<pollfd>& fds = poll_fds_;
    fds.clear();
    for (auto& [peer, conn] : connections_)
      fds.push_back(pollfd{conn->fd(), POLLIN | POLLRDHUP, 0});
    for (auto& [peer, conn] : multi_)
      fds.push_back(pollfd{conn->control_fd(), POLLIN | POLLRDHUP, 0});
    if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
    size_t i = 0;
    auto check = [&](int peer, short revents, auto& conn) {
      if (revents == 0 || conn->busy()) return;
      if (conn->idle_peer_gone()) {
        throw_peer_error(cclRemoteError, peer, "tcp: rank %d closed its connection without a word",
                         peer);
      }
    };
    for (auto& [peer, conn] : connections_) check(peer, fds[i++].revents, conn);
    for (auto& [peer, conn] : multi_) check(peer, fds[i++].revents, conn);
  }

 private:
  int rank_;
  int nranks_;
  std::string comm_tag_;
  const AbortFlag* abort_;
  int nsockets_;  // per peer; 1: connections_, else multi_
  int nthreads_;
  tcp::Handshake handshake_;
  Socket wakeup_;  // eventfd; also written by the multi-socket connections' helper threads
  std::map<int, std::unique_ptr<tcp::TcpConnection>> connections_;
  // Declared after wakeup_: destroyed first, joining their helpers before the eventfd closes.
  std::map<int, std::unique_ptr<tcp::MultiConnection>> multi_;
  struct MultiPolled {
    tcp::MultiConnection* conn;
    size_t first, count;  // its entries in poll_fds_
  };
  std::vector<MultiPolled> multi_polled_;
  // wait()'s scratch, kept to avoid allocating on every call.
  std::vector<pollfd> poll_fds_;
  std::vector<tcp::TcpConnection*> polled_;
};

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(const SetupContext& ctx) {
  if (ctx.nranks < 1 || ctx.rank < 0 || ctx.rank >= ctx.nranks) {
    throw_error(cclInvalidArgument, "tcp: rank %d of %d", ctx.rank, ctx.nranks);
  }
  const int64_t per_thread = config_int("CCL_NSOCKS_PERTHREAD");
  const int64_t threads = config_int("CCL_SOCKET_NTHREADS");
  for (auto [name, value] :
       {std::pair{"CCL_NSOCKS_PERTHREAD", per_thread}, std::pair{"CCL_SOCKET_NTHREADS", threads}}) {
    if (value < 1 || value > tcp::kMaxSockets) {
      throw_error(cclInvalidUsage, "tcp: %s=%lld: must be 1 to %d", name,
                  static_cast<long long>(value), tcp::kMaxSockets);
    }
  }
  if (per_thread * threads > tcp::kMaxSockets) {
    throw_error(cclInvalidUsage,
                "tcp: CCL_SOCKET_NTHREADS x CCL_NSOCKS_PERTHREAD = %lld x %lld = %lld sockets per "
                "peer: at most %d",
                static_cast<long long>(threads), static_cast<long long>(per_thread),
                static_cast<long long>(threads * per_thread), tcp::kMaxSockets);
  }
  return std::make_unique<TcpTransport>(ctx, static_cast<int>(per_thread * threads),
                                        static_cast<int>(threads));
}

}  // namespace ccl::transport
