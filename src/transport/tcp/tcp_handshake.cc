#include "transport/tcp/tcp_handshake.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "core/bootstrap/store.h"
#include "core/error.h"
#include "core/log.h"

namespace ccl::transport::tcp {
namespace {

constexpr std::chrono::milliseconds kPollSlice{100};

timespec to_timespec(std::chrono::microseconds us) {
  return timespec{static_cast<time_t>(us.count() / 1000000),
                  static_cast<long>(us.count() % 1000000) * 1000};
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

}  // namespace

Handshake::Handshake(int rank, int nranks, std::string comm_tag)
    : rank_(rank),
      nranks_(nranks),
      comm_tag_(std::move(comm_tag)),
      tag_hash_(tag_hash(comm_tag_)) {}

std::string Handshake::address_key(const std::string& comm_tag, int rank) {
  return comm_tag + "/tcp/" + std::to_string(rank);
}

Hello Handshake::make_hello(uint16_t kind) const {
  return Hello{kHelloMagic, kHelloVersion, kind, rank_, nranks_, tag_hash_};
}

void Handshake::ensure_listening(Store& store) {
  if (listener_.valid()) return;
  NetInterface iface = choose_interface();
  listener_ = Socket::listen(iface.address);
  listener_.set_nonblocking(true);
  listen_address_ = listener_.local_address().to_string();
  store.set(address_key(comm_tag_, rank_), to_bytes(listen_address_));
  CCL_INFO(kNet | kInit, "tcp: rank %d listening on %s (interface %s)", rank_,
           listen_address_.c_str(), iface.name.c_str());
}

std::map<int, EstablishedSocket> Handshake::establish(const SetupContext& ctx,
                                                      std::span<const int> peers) {
  if (ctx.store == nullptr) throw_error(cclInvalidUsage, "tcp: connect() needs a store");
  ensure_listening(*ctx.store);

  std::map<int, EstablishedSocket> result;
  std::set<int> expected;  // higher ranks, which connect to us
  for (int p : peers) {
    if (p < rank_) continue;
    expected.insert(p);
    auto it = stashed_.find(p);
    if (it != stashed_.end()) {
      result.emplace(p, std::move(it->second));
      stashed_.erase(it);
      established_.insert(p);
    }
  }
  // Lower ranks: they published their address before waiting for anything, so these connects
  // only wait for ranks that are themselves making progress (every wait points downwards).
  std::vector<Outgoing> outgoing;
  for (int p : peers) {
    if (p > rank_) continue;
    std::string address = to_string(ctx.store->get(address_key(comm_tag_, p), ctx.deadline));
    Socket socket = Socket::connect(SocketAddress::parse(address), ctx.deadline, ctx.abort);
    Hello hello = make_hello(kHelloKindHello);
    socket.send_all(&hello, sizeof(hello), ctx.deadline, ctx.abort);
    socket.set_nonblocking(true);
    outgoing.push_back(Outgoing{p, std::move(socket), address});
  }

  for (;;) {
    std::vector<int> missing;
    for (int p : expected) {
      if (!result.count(p)) missing.push_back(p);
    }
    if (outgoing.empty() && missing.empty()) break;
    if (ctx.abort != nullptr && ctx.abort->load()) {
      throw_error(cclRemoteError, "tcp: rank %d: connection setup aborted", rank_);
    }
    if (ctx.deadline.expired()) {
      std::vector<int> unacked;
      for (const Outgoing& out : outgoing) unacked.push_back(out.peer);
      throw_error(cclTimeout,
                  "tcp: rank %d timed out setting up connections (no connection from rank(s) "
                  "[%s], no answer from rank(s) [%s])",
                  rank_, rank_list(missing).c_str(), rank_list(unacked).c_str());
    }
    std::vector<pollfd> fds;
    fds.push_back(pollfd{listener_.fd(), POLLIN, 0});
    for (const Incoming& in : incoming_) fds.push_back(pollfd{in.socket.fd(), POLLIN, 0});
    for (const Outgoing& out : outgoing) fds.push_back(pollfd{out.socket.fd(), POLLIN, 0});
    timespec slice = to_timespec(ctx.deadline.remaining(kPollSlice));
    int ready = ::ppoll(fds.data(), fds.size(), &slice, nullptr);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw_system_error(errno, "tcp: poll during connection setup");
    }
    if (ready == 0) continue;
    // Indices into fds stay valid: each vector is walked backwards and only its own entries go.
    size_t in_base = 1;
    size_t out_base = 1 + incoming_.size();
    for (size_t i = outgoing.size(); i-- > 0;) {
      if (fds[out_base + i].revents == 0) continue;
      if (read_ack(outgoing[i])) {
        int p = outgoing[i].peer;
        result.emplace(p, EstablishedSocket{std::move(outgoing[i].socket), outgoing[i].address});
        established_.insert(p);
        outgoing.erase(outgoing.begin() + static_cast<ptrdiff_t>(i));
      }
    }
    for (size_t i = incoming_.size(); i-- > 0;) {
      if (fds[in_base + i].revents == 0) continue;
      if (read_hello(incoming_[i], expected, result)) {
        incoming_.erase(incoming_.begin() + static_cast<ptrdiff_t>(i));
      }
    }
    if (fds[0].revents != 0) accept_pending();
  }
  return result;
}

void Handshake::accept_pending() {
  for (;;) {
    SocketAddress address;
    address.length = sizeof(address.storage);
    int fd = ::accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&address.storage),
                       &address.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      throw_system_error(errno, "tcp: accept on %s", listen_address_.c_str());
    }
    Incoming in;
    in.socket = Socket(fd);
    in.address = address.to_string();
    if (incoming_.size() >= kMaxIncoming) {
      CCL_WARN(kNet, "tcp: rank %d: too many connections without a hello; closing the one from %s",
               rank_, incoming_.front().address.c_str());
      incoming_.erase(incoming_.begin());
    }
    incoming_.push_back(std::move(in));
  }
}

bool Handshake::read_hello(Incoming& in, const std::set<int>& expected,
                           std::map<int, EstablishedSocket>& result) {
  ssize_t n = ::recv(in.socket.fd(), reinterpret_cast<char*>(&in.hello) + in.got,
                     sizeof(Hello) - in.got, MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return false;
    CCL_WARN(kNet, "tcp: rank %d: connection from %s failed before its hello: %s; ignored", rank_,
             in.address.c_str(), std::strerror(errno));
    return true;
  }
  if (n == 0) {
    CCL_WARN(kNet, "tcp: rank %d: connection from %s closed before its hello; ignored", rank_,
             in.address.c_str());
    return true;
  }
  in.got += static_cast<size_t>(n);
  if (in.got < sizeof(Hello)) return false;
  if (!validate_hello(in, result)) return true;

  Hello ack = make_hello(kHelloKindAck);
  ssize_t w = ::send(in.socket.fd(), &ack, sizeof(ack), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w != static_cast<ssize_t>(sizeof(ack))) {
    CCL_WARN(kNet, "tcp: rank %d: cannot answer rank %d at %s: %s; dropped", rank_, in.hello.rank,
             in.address.c_str(), w < 0 ? std::strerror(errno) : "short write");
    return true;
  }
  int peer = in.hello.rank;
  EstablishedSocket established{std::move(in.socket), in.address};
  if (expected.count(peer)) {
    result.emplace(peer, std::move(established));
    established_.insert(peer);
  } else {
    stashed_.emplace(peer, std::move(established));  // for our connect() call that lists it
  }
  return true;
}

bool Handshake::validate_hello(const Incoming& in,
                               const std::map<int, EstablishedSocket>& result) const {
  const Hello& h = in.hello;
  std::string reason;
  if (h.magic != kHelloMagic || h.version != kHelloVersion || h.kind != kHelloKindHello) {
    reason = "it did not send a ccl tcp hello";
  } else if (h.tag_hash != tag_hash_ || h.nranks != nranks_) {
    reason = "its hello is for another communicator";
  } else if (h.rank <= rank_ || h.rank >= nranks_) {
    reason = "it says it is rank " + std::to_string(h.rank) + ", which must not connect to us";
  } else if (established_.count(h.rank) || stashed_.count(h.rank) || result.count(h.rank)) {
    reason = "rank " + std::to_string(h.rank) + " is connected already";
  } else {
    return true;
  }
  CCL_WARN(kNet, "tcp: rank %d: dropped the connection from %s: %s", rank_, in.address.c_str(),
           reason.c_str());
  return false;
}

bool Handshake::read_ack(Outgoing& out) {
  ssize_t n = ::recv(out.socket.fd(), reinterpret_cast<char*>(&out.ack) + out.got,
                     sizeof(Hello) - out.got, MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return false;
    throw_error(cclRemoteError, "tcp: rank %d: connection to rank %d (%s) failed in setup: %s",
                rank_, out.peer, out.address.c_str(), std::strerror(errno));
  }
  if (n == 0) {
    throw_error(cclRemoteError,
                "tcp: rank %d: rank %d (%s) closed the connection in setup (it refused our hello)",
                rank_, out.peer, out.address.c_str());
  }
  out.got += static_cast<size_t>(n);
  if (out.got < sizeof(Hello)) return false;
  const Hello& a = out.ack;
  if (a.magic != kHelloMagic || a.version != kHelloVersion || a.kind != kHelloKindAck ||
      a.rank != out.peer || a.nranks != nranks_ || a.tag_hash != tag_hash_) {
    throw_error(cclRemoteError,
                "tcp: rank %d: %s (published by rank %d) is not rank %d of this communicator",
                rank_, out.address.c_str(), out.peer, out.peer);
  }
  return true;
}

}  // namespace ccl::transport::tcp
