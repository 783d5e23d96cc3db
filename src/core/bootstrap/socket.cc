// SocketAddress and Socket (socket.h). Every blocking call polls in slices of at most 100 ms so
// that the abort flag is noticed promptly and the deadline is never overrun by more than a slice.
#include "core/bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/log.h"

namespace ccl {

namespace {

constexpr std::chrono::microseconds kPollSlice{100'000};

bool aborted(const AbortFlag* abort) {
  return abort != nullptr && abort->load(std::memory_order_relaxed);
}

// One poll() of at most a slice; returns revents (0 when the slice passed). Throws on abort.
short poll_slice(int fd, short events, Deadline deadline, const AbortFlag* abort) {
  if (aborted(abort)) throw_error(cclRemoteError, "aborted");
  auto wait = deadline.remaining(kPollSlice);
  // Round up so that a sub-millisecond remainder does not become a busy loop of 0 ms polls.
  int ms = static_cast<int>((wait.count() + 999) / 1000);
  pollfd p{fd, events, 0};
  int rc = ::poll(&p, 1, ms);
  if (rc < 0) {
    if (errno == EINTR) return 0;
    throw_system_error(errno, "poll");
  }
  if (aborted(abort)) throw_error(cclRemoteError, "aborted");
  return rc == 0 ? 0 : p.revents;
}

// The peer, for error messages. After a reset the kernel may no longer know it.
std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "(unknown peer)";
  SocketAddress a;
  a.storage = ss;
  a.length = len;
  return a.to_string();
}

bool parse_port(const std::string& text, uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

}  // namespace

// ---- SocketAddress ----

SocketAddress SocketAddress::from_ip(const std::string& ip, uint16_t port) {
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.length = sizeof(sockaddr_in);
    return a;
  }
  a.storage = {};
  if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.length = sizeof(sockaddr_in6);
    return a;
  }
  throw_error(cclInvalidArgument, "'%s' is not a numeric IPv4 or IPv6 address", ip.c_str());
}

SocketAddress SocketAddress::parse(const std::string& host_port) {
  std::string host, port_text;
  if (!host_port.empty() && host_port[0] == '[') {
    size_t close = host_port.find(']');
    if (close == std::string::npos || close + 1 >= host_port.size() ||
        host_port[close + 1] != ':') {
      throw_error(cclInvalidArgument, "address '%s' is not [ipv6]:port", host_port.c_str());
    }
    host = host_port.substr(1, close - 1);
    port_text = host_port.substr(close + 2);
  } else {
    size_t colon = host_port.rfind(':');
    if (colon == std::string::npos || host_port.find(':') != colon) {
      // No port, or a bare IPv6 address whose port cannot be told apart from its last group.
      throw_error(cclInvalidArgument, "address '%s' is not host:port (write IPv6 as [addr]:port)",
                  host_port.c_str());
    }
    host = host_port.substr(0, colon);
    port_text = host_port.substr(colon + 1);
  }
  uint16_t port = 0;
  if (host.empty() || !parse_port(port_text, &port)) {
    throw_error(cclInvalidArgument, "address '%s' is not host:port with a port in 0..65535",
                host_port.c_str());
  }
  // A numeric address first: no resolver involved.
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1 ||
      inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    return from_ip(host, port);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw_error(cclInvalidArgument, "cannot resolve host '%s': %s", host.c_str(),
                rc != 0 ? gai_strerror(rc) : "no address");
  }
  // Prefer IPv4: a name that resolves to both is most often reachable over IPv4.
  const addrinfo* pick = nullptr;
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
    if (ai->ai_family == AF_INET6 && pick == nullptr) pick = ai;
  }
  if (pick == nullptr) {
    freeaddrinfo(result);
    throw_error(cclInvalidArgument, "host '%s' has no IPv4 or IPv6 address", host.c_str());
  }
  a.storage = {};
  memcpy(&a.storage, pick->ai_addr, pick->ai_addrlen);
  a.length = pick->ai_addrlen;
  freeaddrinfo(result);
  a.set_port(port);
  return a;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return 0;
}

void SocketAddress::set_port(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SocketAddress::host() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof(buf));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf,
              sizeof(buf));
  } else {
    return "(no address)";
  }
  return buf;
}

bool SocketAddress::is_wildcard() const {
  if (family() == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr);
  }
  return false;
}

std::string SocketAddress::to_string() const {
  if (family() == AF_INET6) return "[" + host() + "]:" + std::to_string(port());
  if (family() == AF_INET) return host() + ":" + std::to_string(port());
  return "(no address)";
}

// ---- Socket ----

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const SocketAddress& address, int backlog) {
  // Non-blocking, so that accept() after a poll can never block if another thread won the race.
  Socket s(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) throw_system_error(errno, "socket for %s", address.to_string().c_str());
  int one = 1;
  // A restarted job must be able to reuse the port of connections still in TIME_WAIT.
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    throw_system_error(errno, "bind to %s", address.to_string().c_str());
  }
  if (::listen(s.fd(), backlog) != 0) {
    throw_system_error(errno, "listen on %s", address.to_string().c_str());
  }
  return s;
}

namespace {

// Whether a connected socket's two ends are one address and port.
bool connected_to_itself(int fd) {
  sockaddr_storage mine{}, peer{};
  socklen_t mine_len = sizeof(mine), peer_len = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &mine_len) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  return mine_len == peer_len && std::memcmp(&mine, &peer, mine_len) == 0;
}

}  // namespace

namespace {

// One connection attempt: 0 and `out` connected, or the errno that stopped it (ETIMEDOUT at the
// deadline; ECONNREFUSED also for a connection to itself).
int attempt_connect(const SocketAddress& address, Deadline deadline, const AbortFlag* abort,
                    Socket* out) {
  Socket s(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) throw_system_error(errno, "socket for %s", address.to_string().c_str());
  int err = 0;
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    err = errno;
  }
  if (err == EINPROGRESS || err == EINTR) {
    err = ETIMEDOUT;
    while (!deadline.expired()) {
      short ev = poll_slice(s.fd(), POLLOUT, deadline, abort);
      if (ev == 0) continue;
      socklen_t len = sizeof(err);
      if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      break;
    }
  }
  // Connected to itself: with no listener on a loopback port, a connect whose own ephemeral port
  // happens to be that port completes as a TCP simultaneous open with itself, and then holds
  // the port the listener is about to bind. As refused: close it.
  if (err == 0 && connected_to_itself(s.fd())) err = ECONNREFUSED;
  if (err == 0) {
    s.set_nonblocking(false);
    s.set_nodelay(true);
    *out = std::move(s);
  }
  return err;
}

}  // namespace

Socket Socket::connect(const SocketAddress& address, Deadline deadline, const AbortFlag* abort) {
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    if (aborted(abort)) throw_error(cclRemoteError, "aborted");
    Socket s;
    const int err = attempt_connect(address, deadline, abort, &s);
    if (err == 0) return s;
    // Refused: the listener is not up yet. Timed out: a SYN was lost. Both are worth a retry.
    if (err != ECONNREFUSED && err != ETIMEDOUT) {
      throw_system_error(err, "connect to %s", address.to_string().c_str());
    }
    if (deadline.expired()) {
      throw_error(cclTimeout, "connect to %s timed out (%s)", address.to_string().c_str(),
                  strerror(err));
    }
    auto sleep = std::min<std::chrono::microseconds>(backoff, deadline.remaining(kPollSlice));
    std::this_thread::sleep_for(sleep);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

Socket Socket::connect_once(const SocketAddress& address, Deadline deadline,
                            const AbortFlag* abort) {
  for (;;) {
    if (aborted(abort)) throw_error(cclRemoteError, "aborted");
    Socket s;
    const int err = attempt_connect(address, deadline, abort, &s);
    if (err == 0) return s;
    if (err == ECONNREFUSED || err == ECONNRESET) return Socket();
    if (err != ETIMEDOUT) throw_system_error(err, "connect to %s", address.to_string().c_str());
    if (deadline.expired()) {
      throw_error(cclTimeout, "connect to %s timed out", address.to_string().c_str());
    }
  }
}

Socket Socket::accept(Deadline deadline, const AbortFlag* abort) {
  for (;;) {
    // Poll first: a listener handed to us (a launcher's fd) may be blocking.
    short ev = poll_slice(fd_, POLLIN, deadline, abort);
    if (ev != 0) {
      int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        Socket s(fd);
        s.set_nodelay(true);
        return s;
      }
      int err = errno;
      if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED) {
        throw_system_error(err, "accept on %s", local_address().to_string().c_str());
      }
    }
    if (deadline.expired()) {
      throw_error(cclTimeout, "accept on %s timed out", local_address().to_string().c_str());
    }
  }
}

SocketAddress Socket::local_address() const {
  SocketAddress a;
  socklen_t len = sizeof(a.storage);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &len) != 0) {
    throw_system_error(errno, "getsockname");
  }
  a.length = len;
  return a;
}

SocketAddress Socket::peer_address() const {
  SocketAddress a;
  socklen_t len = sizeof(a.storage);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a.storage), &len) != 0) {
    throw_system_error(errno, "getpeername");
  }
  a.length = len;
  return a;
}

void Socket::set_nonblocking(bool on) {
  int flags = fcntl(fd_, F_GETFL, 0);
  if (flags < 0) throw_system_error(errno, "fcntl(F_GETFL)");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd_, F_SETFL, flags) != 0) throw_system_error(errno, "fcntl(F_SETFL)");
}

void Socket::set_nodelay(bool on) {
  int value = on ? 1 : 0;
  // Not fatal: a non-TCP socket (AF_UNIX in tests) simply has no Nagle to turn off.
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &value, sizeof(value));
}

void Socket::send_all(const void* data, size_t bytes, Deadline deadline, const AbortFlag* abort) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    if (aborted(abort)) throw_error(cclRemoteError, "aborted");
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    int err = errno;
    if (err == EINTR) continue;
    if (err == EPIPE || err == ECONNRESET) {
      throw_error(cclRemoteError, "connection to %s lost while sending (%s)",
                  peer_name(fd_).c_str(), strerror(err));
    }
    if (err != EAGAIN && err != EWOULDBLOCK) {
      throw_system_error(err, "send to %s", peer_name(fd_).c_str());
    }
    if (deadline.expired()) {
      throw_error(cclTimeout, "send to %s timed out with %zu bytes left", peer_name(fd_).c_str(),
                  bytes);
    }
    poll_slice(fd_, POLLOUT, deadline, abort);
  }
}

void Socket::recv_all(void* data, size_t bytes, Deadline deadline, const AbortFlag* abort) {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    if (aborted(abort)) throw_error(cclRemoteError, "aborted");
    ssize_t n = ::recv(fd_, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      throw_error(cclRemoteError, "connection closed by %s with %zu bytes still expected",
                  peer_name(fd_).c_str(), bytes);
    }
    int err = errno;
    if (err == EINTR) continue;
    if (err == ECONNRESET || err == EPIPE) {
      throw_error(cclRemoteError, "connection to %s reset while receiving (%s)",
                  peer_name(fd_).c_str(), strerror(err));
    }
    if (err != EAGAIN && err != EWOULDBLOCK) {
      throw_system_error(err, "recv from %s", peer_name(fd_).c_str());
    }
    if (deadline.expired()) {
      throw_error(cclTimeout, "receive from %s timed out with %zu bytes left",
                  peer_name(fd_).c_str(), bytes);
    }
    poll_slice(fd_, POLLIN, deadline, abort);
  }
}

}  // namespace ccl
