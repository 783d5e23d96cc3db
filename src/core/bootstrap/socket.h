// Thin RAII wrappers over BSD sockets, used by the bootstrap and the tcp transport.
// Every blocking call takes a Deadline and an optional abort flag and polls in short slices,
// so nothing here can hang past the deadline.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/deadline.h"

namespace ccl {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  // "1.2.3.4:5678", "[::1]:5678", "hostname:5678" (resolved). Throws InvalidArgument.
  static SocketAddress parse(const std::string& host_port);
  static SocketAddress from_ip(const std::string& ip, uint16_t port);  // throws InvalidArgument
  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  std::string host() const;       // numeric
  bool is_wildcard() const;       // 0.0.0.0 or ::, i.e. every address of the host
  std::string to_string() const;  // host:port, [v6]:port
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();

  // A listening socket on `address` (port 0: the kernel picks one; see local_address()).
  static Socket listen(const SocketAddress& address, int backlog = 128);
  // Connects, retrying refused connections until the deadline (the listener may not be up yet).
  static Socket connect(const SocketAddress& address, Deadline deadline,
                        const AbortFlag* abort = nullptr);
  // One connection, where a refusal is an answer: an invalid Socket when nothing listens there
  // (a process that is gone); Timeout at the deadline (a host that does not answer).
  static Socket connect_once(const SocketAddress& address, Deadline deadline,
                             const AbortFlag* abort = nullptr);
  // Accepts one connection; Timeout at the deadline.
  Socket accept(Deadline deadline, const AbortFlag* abort = nullptr);

  SocketAddress local_address() const;
  SocketAddress peer_address() const;
  void set_nonblocking(bool on);
  void set_nodelay(bool on);

  // Blocking-with-deadline whole transfers. A closed or reset peer is RemoteError.
  void send_all(const void* data, size_t bytes, Deadline deadline,
                const AbortFlag* abort = nullptr);
  void recv_all(void* data, size_t bytes, Deadline deadline, const AbortFlag* abort = nullptr);

 private:
  int fd_ = -1;
};

// Network interfaces and CCL_SOCKET_IFNAME, with NCCL's syntax: a comma-separated list of name
// prefixes ("eth,ib"), "^" to exclude ("^docker,lo"), "=" for exact names ("=eth0").
struct NetInterface {
  std::string name;
  SocketAddress address;  // port 0
};
std::vector<NetInterface> list_interfaces();  // up, with an IPv4 or IPv6 address
bool interface_matches(const std::string& name, const std::string& filter);
// The address to listen on for peers: the first interface that matches CCL_SOCKET_IFNAME; when
// unset, the first that is not loopback or docker*, else loopback. Throws SystemError if none.
NetInterface choose_interface();

}  // namespace ccl
