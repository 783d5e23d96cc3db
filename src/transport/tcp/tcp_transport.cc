#include "transport/tcp/tcp_transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "transport/failure_notice.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/tcp_handshake.h"

namespace ccl::transport {
namespace {

using namespace std::chrono;

// wait() sleeps in slices so that it notices the abort flag without an interrupt().
constexpr microseconds kWaitSlice = milliseconds(100);

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(const SetupContext& ctx)
      : rank_(ctx.rank),
        nranks_(ctx.nranks),
        comm_tag_(ctx.comm_tag),
        abort_(ctx.abort),
        handshake_(ctx.rank, ctx.nranks, ctx.comm_tag) {
    int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) throw_system_error(errno, "tcp: eventfd");
    wakeup_ = Socket(fd);  // Socket is only used as an RAII fd here
  }

  const char* name() const override { return "tcp"; }

  std::vector<Connection*> connect(const SetupContext& ctx, std::span<const int> peers) override {
    if (ctx.rank != rank_ || ctx.nranks != nranks_ || ctx.comm_tag != comm_tag_) {
      throw_error(cclInvalidUsage, "tcp: connect() for another communicator than the transport's");
    }
    std::vector<int> sorted(peers.begin(), peers.end());
    std::sort(sorted.begin(), sorted.end());
    auto twice = std::adjacent_find(sorted.begin(), sorted.end());
    if (twice != sorted.end()) {
      throw_error(cclInvalidArgument, "tcp: rank %d listed twice in connect()", *twice);
    }
    std::vector<int> fresh;
    for (int p : peers) {
      if (p < 0 || p >= nranks_ || p == rank_) {
        throw_error(cclInvalidArgument, "tcp: rank %d cannot connect to rank %d of %d", rank_, p,
                    nranks_);
      }
      // A peer connected by an earlier call keeps its connection; both sides know it.
      if (!connections_.count(p)) fresh.push_back(p);
    }
    auto sockets = handshake_.establish(ctx, fresh);
    for (auto& [peer, established] : sockets) {
      CCL_INFO(kNet | kInit, "tcp: rank %d connected to rank %d (%s)", rank_, peer,
               established.address.c_str());
      connections_.emplace(peer, std::make_unique<tcp::TcpConnection>(
                                     peer, std::move(established.socket), established.address));
    }
    std::vector<Connection*> result;
    for (int p : peers) result.push_back(connections_.at(p).get());
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
  }

  void collect_notices(std::vector<std::pair<int, FailureNotice>>& out) override {
    for (auto& [peer, conn] : connections_) {
      if (auto notice = conn->peek_notice()) out.emplace_back(peer, *notice);
    }
  }

  void check_health() override {
    std::vector<pollfd>& fds = poll_fds_;
    fds.clear();
    for (auto& [peer, conn] : connections_)
      fds.push_back(pollfd{conn->fd(), POLLIN | POLLRDHUP, 0});
    if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
    size_t i = 0;
    for (auto& [peer, conn] : connections_) {
      const short revents = fds[i++].revents;
      if (revents == 0 || conn->busy()) continue;
      if (conn->idle_peer_gone()) {
        throw_peer_error(cclRemoteError, peer, "tcp: rank %d closed its connection without a word",
                         peer);
      }
    }
  }

 private:
  int rank_;
  int nranks_;
  std::string comm_tag_;
  const AbortFlag* abort_;
  tcp::Handshake handshake_;
  Socket wakeup_;  // eventfd
  std::map<int, std::unique_ptr<tcp::TcpConnection>> connections_;
  // wait()'s scratch, kept to avoid allocating on every call.
  std::vector<pollfd> poll_fds_;
  std::vector<tcp::TcpConnection*> polled_;
};

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(const SetupContext& ctx) {
  if (ctx.nranks < 1 || ctx.rank < 0 || ctx.rank >= ctx.nranks) {
    throw_error(cclInvalidArgument, "tcp: rank %d of %d", ctx.rank, ctx.nranks);
  }
  return std::make_unique<TcpTransport>(ctx);
}

}  // namespace ccl::transport
