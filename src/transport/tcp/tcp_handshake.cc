#include "transport/tcp/tcp_handshake.h"

#include <errno.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap/store.h"

namespace ccl::transport::tcp {
namespace {

constexpr std::chrono::milliseconds kPollSlice{100};
// A flood is accepted this many connections per poll round, so that the hellos of connections
// already accepted are read in between (a real rank's is there at once) before the cap evicts.
constexpr int kAcceptsPerRound = 32;
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after EMFILE and the like
// Dropped strangers are logged one by one up to this many, then only counted.
constexpr size_t kStrangersLogged = 8;

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

std::string hello_problem(const Hello& h, int rank, int nranks, uint64_t tag_hash) {
  if (h.magic != kHelloMagic || h.version != kHelloVersion || h.kind != kHelloKindHello) {
    return "it did not send a ccl tcp hello";
  }
  if (h.tag_hash != tag_hash || h.nranks != nranks) return "its hello is for another communicator";
  if (h.rank <= rank || h.rank >= nranks) {
    return "it says it is rank " + std::to_string(h.rank) + ", which must not connect to us";
  }
  if (h.nsockets < 1 || h.nsockets > kMaxSockets || h.socket >= h.nsockets) {
    return "it names socket " + std::to_string(h.socket) + " of " + std::to_string(h.nsockets);
  }
  return "";
}

bool ack_matches(const Hello& a, int peer, int nranks, uint64_t tag_hash) {
  return a.magic == kHelloMagic && a.version == kHelloVersion && a.kind == kHelloKindAck &&
         a.rank == peer && a.nranks == nranks && a.tag_hash == tag_hash;
}

Handshake::Handshake(int rank, int nranks, std::string comm_tag, int nsockets)
    : rank_(rank),
      nranks_(nranks),
      comm_tag_(std::move(comm_tag)),
      tag_hash_(tag_hash(comm_tag_)),
      nsockets_(nsockets) {}

std::string Handshake::address_key(const std::string& comm_tag, int rank) {
  return comm_tag + "/tcp/" + std::to_string(rank);
}

std::string Handshake::encode_published(const std::string& address, const Secret& token) {
  return address + " " + secret_to_hex(token);
}

Handshake::Published Handshake::decode_published(const std::string& value) {
  Published p;
  const size_t space = value.rfind(' ');
  if (space == std::string::npos || !secret_from_hex(value.substr(space + 1), &p.token)) {
    // The value is not echoed: it may hold a token.
    throw_error(cclRemoteError,
                "tcp: a published listener address (%zu bytes) is not 'host:port token': a "
                "rank of another ccl version?",
                value.size());
  }
  p.address = value.substr(0, space);
  return p;
}

size_t Handshake::max_incoming() {
  rlimit nofile{};
  rlim_t limit = 1024;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    limit = nofile.rlim_cur;
  return static_cast<size_t>(std::clamp<rlim_t>(limit / 16, 16, 128));
}

Hello Handshake::make_hello(uint16_t kind, const Secret& token, int socket) const {
  Hello h{kHelloMagic, kHelloVersion, kind, rank_, nranks_, tag_hash_, {}};
  std::memcpy(h.token, token.data(), sizeof(h.token));
  h.socket = static_cast<uint16_t>(socket);
  h.nsockets = static_cast<uint16_t>(nsockets_);
  return h;
}

void Handshake::throw_count_mismatch(int peer, int peer_nsockets) const {
  throw_error(cclInvalidUsage,
              "tcp: rank %d uses %d sockets per peer but rank %d uses %d: set "
              "CCL_SOCKET_NTHREADS and CCL_NSOCKS_PERTHREAD alike on every rank",
              rank_, nsockets_, peer, peer_nsockets);
}

void Handshake::ensure_listening(Store& store) {
  if (listener_.valid()) return;
  NetInterface iface = choose_interface();
  listener_ = Socket::listen(iface.address);
  listener_.set_nonblocking(true);
  listen_address_ = listener_.local_address().to_string();
  token_ = random_secret();
  store.set(address_key(comm_tag_, rank_), to_bytes(encode_published(listen_address_, token_)));
  CCL_INFO(kNet | kInit, "tcp: rank %d listening on %s (interface %s)", rank_,
           listen_address_.c_str(), iface.name.c_str());
}

std::map<int, EstablishedPeer> Handshake::establish(const SetupContext& ctx,
                                                    std::span<const int> peers) {
  if (ctx.store == nullptr) throw_error(cclInvalidUsage, "tcp: connect() needs a store");
  ensure_listening(*ctx.store);

  std::map<int, EstablishedPeer> result;
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
  std::map<int, EstablishedPeer> acked;  // our connections to lower ranks, as acks come
  for (int p : peers) {
    if (p > rank_) continue;
    Published published =
        decode_published(to_string(ctx.store->get(address_key(comm_tag_, p), ctx.deadline)));
    const SocketAddress address = SocketAddress::parse(published.address);
    for (int i = 0; i < nsockets_; ++i) {
      Socket socket = Socket::connect(address, ctx.deadline, ctx.abort);
      Hello hello = make_hello(kHelloKindHello, published.token, i);
      socket.send_all(&hello, sizeof(hello), ctx.deadline, ctx.abort);
      socket.set_nonblocking(true);
      outgoing.push_back(Outgoing{p, i, std::move(socket), published.address, published.token});
    }
    acked[p].sockets.resize(static_cast<size_t>(nsockets_));
    acked[p].address = published.address;
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
      for (const Outgoing& out : outgoing) {
        if (unacked.empty() || unacked.back() != out.peer) unacked.push_back(out.peer);
      }
      throw_error(cclTimeout,
                  "tcp: rank %d timed out setting up connections (no connection from rank(s) "
                  "[%s], no answer from rank(s) [%s])",
                  rank_, rank_list(missing).c_str(), rank_list(unacked).c_str());
    }
    drop_expired_incoming();
    std::vector<pollfd> fds;
    const bool accepting = Clock::now() >= accept_paused_until_;
    fds.push_back(pollfd{accepting ? listener_.fd() : -1, POLLIN, 0});
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
        const int p = outgoing[i].peer;
        EstablishedPeer& pair = acked[p];
        pair.sockets[static_cast<size_t>(outgoing[i].index)] = std::move(outgoing[i].socket);
        outgoing.erase(outgoing.begin() + static_cast<ptrdiff_t>(i));
        const bool complete = std::none_of(outgoing.begin(), outgoing.end(),
                                           [&](const Outgoing& o) { return o.peer == p; });
        if (complete) {
          result.emplace(p, std::move(pair));
          established_.insert(p);
        }
      }
    }
    for (size_t i = incoming_.size(); i-- > 0;) {
      if (fds[in_base + i].revents == 0) continue;
      if (read_hello(incoming_[i], expected, result)) {
        incoming_.erase(incoming_.begin() + static_cast<ptrdiff_t>(i));
      }
    }
    if (fds[0].revents != 0) accept_pending(expected, result);
  }
  return result;
}

void Handshake::accept_pending(const std::set<int>& expected,
                               std::map<int, EstablishedPeer>& result) {
  if (incoming_cap_ == 0) incoming_cap_ = max_incoming();
  // The sockets of the ranks still to connect may all wait for their hello at once: the cap
  // against strangers never evicts them (up to 64 a pair).
  size_t waiting = 0;
  for (int p : expected) waiting += result.count(p) == 0 ? 1 : 0;
  const size_t cap = std::max(incoming_cap_, static_cast<size_t>(nsockets_) * waiting);
  for (int round = 0; round < kAcceptsPerRound; ++round) {
    SocketAddress address;
    address.length = sizeof(address.storage);
    int fd = ::accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&address.storage),
                       &address.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // Out of descriptors or memory. If strangers hold some, lower their cap below what they
        // hold and give up the oldest, then go on accepting: real ranks queued behind a flood
        // must get in. Otherwise stop polling the listener for a moment (it would stay readable
        // and spin the loop).
        if (incoming_.empty()) {
          CCL_WARN(kNet, "tcp: rank %d: accept on %s: %s", rank_, listen_address_.c_str(),
                   std::strerror(err));
          accept_paused_until_ = Clock::now() + kAcceptPause;
          return;
        }
        incoming_cap_ = std::max<size_t>(1, incoming_.size() - (incoming_.size() + 3) / 4);
        CCL_WARN(kNet,
                 "tcp: rank %d: accept on %s: %s; at most %zu connections may now wait for "
                 "a hello",
                 rank_, listen_address_.c_str(), std::strerror(err), incoming_cap_);
        while (incoming_.size() >= incoming_cap_) {
          note_stranger(incoming_.front().address, "out of descriptors");
          incoming_.erase(incoming_.begin());
        }
        continue;
      }
      throw_system_error(err, "tcp: accept on %s", listen_address_.c_str());
    }
    Incoming in;
    in.socket = Socket(fd);
    in.address = address.to_string();
    in.deadline = Clock::now() + kHelloTimeout;
    // A real rank sent its hello right after connecting: read it now, before any eviction.
    if (read_hello(in, expected, result)) continue;
    if (incoming_.size() >= cap) {
      note_stranger(incoming_.front().address, "too many connections without a hello");
      incoming_.erase(incoming_.begin());
    }
    incoming_.push_back(std::move(in));
  }
}

void Handshake::drop_expired_incoming() {
  const auto now = Clock::now();
  std::erase_if(incoming_, [&](const Incoming& in) {
    if (now < in.deadline) return false;
    note_stranger(in.address,
                  "no whole hello within " + std::to_string(kHelloTimeout.count()) + " s");
    return true;
  });
}

void Handshake::note_stranger(const std::string& address, const std::string& reason) {
  ++strangers_dropped_;
  if (strangers_dropped_ <= kStrangersLogged) {
    CCL_WARN(kNet, "tcp: rank %d: dropped the connection from %s: %s%s", rank_, address.c_str(),
             reason.c_str(),
             strangers_dropped_ == kStrangersLogged ? " (further ones are dropped silently)" : "");
  } else {
    CCL_TRACE(kNet, "tcp: rank %d: dropped the connection from %s: %s", rank_, address.c_str(),
              reason.c_str());
  }
}

bool Handshake::read_hello(Incoming& in, const std::set<int>& expected,
                           std::map<int, EstablishedPeer>& result) {
  ssize_t n = ::recv(in.socket.fd(), reinterpret_cast<char*>(&in.hello) + in.got,
                     sizeof(Hello) - in.got, MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return false;
    note_stranger(in.address, std::string("failed before its hello: ") + std::strerror(errno));
    return true;
  }
  if (n == 0) {
    note_stranger(in.address, "closed before its hello");
    return true;
  }
  in.got += static_cast<size_t>(n);
  if (in.got >= sizeof(in.hello.magic) && in.hello.magic != kHelloMagic) {
    note_stranger(in.address, "it did not send a ccl tcp hello");  // garbage: no need to wait
    return true;
  }
  if (in.got < sizeof(Hello)) return false;
  if (!validate_hello(in, result)) return true;

  Hello ack = make_hello(kHelloKindAck, token_, in.hello.socket);
  ssize_t w = ::send(in.socket.fd(), &ack, sizeof(ack), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w != static_cast<ssize_t>(sizeof(ack))) {
    CCL_WARN(kNet, "tcp: rank %d: cannot answer rank %d at %s: %s; dropped", rank_, in.hello.rank,
             in.address.c_str(), w < 0 ? std::strerror(errno) : "short write");
    return true;
  }
  const int peer = in.hello.rank;
  // The ack told the peer our count: both sides fail alike.
  if (in.hello.nsockets != nsockets_) throw_count_mismatch(peer, in.hello.nsockets);
  EstablishedPeer& pair = partial_[peer];
  if (pair.sockets.empty()) pair.sockets.resize(static_cast<size_t>(nsockets_));
  if (in.hello.socket == 0) pair.address = in.address;
  pair.sockets[in.hello.socket] = std::move(in.socket);
  if (std::any_of(pair.sockets.begin(), pair.sockets.end(),
                  [](const Socket& s) { return !s.valid(); })) {
    return true;  // more of the pair's sockets to come
  }
  EstablishedPeer established = std::move(pair);
  partial_.erase(peer);
  if (expected.count(peer)) {
    result.emplace(peer, std::move(established));
    established_.insert(peer);
  } else {
    stashed_.emplace(peer, std::move(established));  // for our connect() call that lists it
  }
  return true;
}

bool Handshake::validate_hello(const Incoming& in, const std::map<int, EstablishedPeer>& result) {
  const Hello& h = in.hello;
  std::string reason = hello_problem(h, rank_, nranks_, tag_hash_);
  Secret token{};
  std::memcpy(token.data(), h.token, token.size());
  // Constant time: how long the check takes must not tell how much of a guess was right.
  if (reason.empty() && !secrets_equal(token, token_)) {
    reason = "its hello does not carry this listener's token";
  }
  if (reason.empty()) {
    auto part = partial_.find(h.rank);
    const bool index_taken = part != partial_.end() && h.socket < part->second.sockets.size() &&
                             part->second.sockets[h.socket].valid();
    if (!established_.count(h.rank) && !stashed_.count(h.rank) && !result.count(h.rank) &&
        !index_taken) {
      return true;
    }
    reason = index_taken ? "rank " + std::to_string(h.rank) + "'s socket " +
                               std::to_string(h.socket) + " is connected already"
                         : "rank " + std::to_string(h.rank) + " is connected already";
  }
  note_stranger(in.address, reason);
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
  Secret token{};
  std::memcpy(token.data(), a.token, token.size());
  if (!ack_matches(a, out.peer, nranks_, tag_hash_) || !secrets_equal(token, out.token)) {
    throw_error(cclRemoteError,
                "tcp: rank %d: %s (published by rank %d) is not rank %d of this communicator",
                rank_, out.address.c_str(), out.peer, out.peer);
  }
  if (a.nsockets != nsockets_) throw_count_mismatch(out.peer, a.nsockets);
  if (a.socket != out.index) {
    throw_error(cclRemoteError, "tcp: rank %d: rank %d acked socket %d on our socket %d", rank_,
                out.peer, a.socket, out.index);
  }
  return true;
}

}  // namespace ccl::transport::tcp
