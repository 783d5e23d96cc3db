// The attacker of hostile_check (hostile_attacker.h): a forked process with no part in the job.
#include "hostile_attacker.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ccl::hostile {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;
using std::chrono::milliseconds;

constexpr int kFirstFlood = 300;  // held connections in the first wave at a listener
constexpr int kLaterFlood = 20;   // and in each later one
constexpr auto kWaveEvery = milliseconds(1000);
constexpr auto kHoldAtMost = milliseconds(8000);  // then the attacker lets go itself
constexpr auto kTrickleEvery = milliseconds(1000);
constexpr size_t kMaxOpen = 1500;

struct Listener {
  sockaddr_storage address{};
  socklen_t length = 0;
  bool wildcard = false;  // bound to every address
  Clock::time_point next_wave{};
};

enum class Kind { kFlood, kWrongSecret, kPeerHello, kGarbage, kHalfHello, kTrickle, kOversize };

struct Conn {
  int fd = -1;
  Kind kind = Kind::kFlood;
  bool connected = false;
  Bytes payload;
  size_t sent = 0;
  Clock::time_point opened, next_byte;
};

Bytes random_bytes(size_t n) {
  Bytes b(n);
  if (getrandom(b.data(), n, 0) != static_cast<ssize_t>(n)) {
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 97 + 13);
  }
  return b;
}

void put_u32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A store client's hello ("CCLS", version 1, a secret, rank 0 of 2) with a guessed secret.
Bytes store_hello() {
  Bytes b;
  put_u32(b, 0x534c4343);
  put_u32(b, 1);
  Bytes secret = random_bytes(16);
  b.insert(b.end(), secret.begin(), secret.end());
  put_u32(b, 0);
  put_u32(b, 2);
  return b;
}

// A tcp transport hello ("CCCT", version 2, kind hello, rank 1 of 2) with a guessed tag hash
// and token.
Bytes peer_hello() {
  Bytes b;
  put_u32(b, 0x54434343);
  b.push_back(2);
  b.push_back(0);
  b.push_back(1);
  b.push_back(0);
  put_u32(b, 1);
  put_u32(b, 2);
  Bytes guess = random_bytes(8 + 16);
  b.insert(b.end(), guess.begin(), guess.end());
  return b;
}

Bytes payload_of(Kind kind) {
  switch (kind) {
    case Kind::kFlood:
      return {};
    case Kind::kWrongSecret:
    case Kind::kTrickle:
      return store_hello();
    case Kind::kPeerHello:
      return peer_hello();
    case Kind::kGarbage:
      return random_bytes(64);
    case Kind::kHalfHello: {
      Bytes b = store_hello();
      b.resize(10);
      return b;
    }
    case Kind::kOversize:
      return Bytes(40, 0xff);  // every length field a reader might take from it is huge
  }
  return {};
}

std::set<unsigned long> socket_inodes(pid_t pid) {
  std::set<unsigned long> inodes;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return inodes;
  while (dirent* e = readdir(d)) {
    char link[64] = {};
    std::string path = dir + "/" + e->d_name;
    ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
    unsigned long inode = 0;
    if (n > 0 && sscanf(link, "socket:[%lu]", &inode) == 1) inodes.insert(inode);
  }
  closedir(d);
  return inodes;
}

// The listening sockets among `inodes`, from /proc/net/tcp and tcp6, keyed by inode.
std::map<unsigned long, Listener> listeners_of(const std::set<unsigned long>& inodes) {
  std::map<unsigned long, Listener> found;
  for (int v6 = 0; v6 <= 1; ++v6) {
    std::ifstream in(v6 ? "/proc/net/tcp6" : "/proc/net/tcp");
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
      unsigned long inode = 0;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      if (state != "0A" || !inodes.count(inode)) continue;  // 0A: LISTEN
      size_t colon = local.find(':');
      if (colon == std::string::npos) continue;
      uint16_t port = static_cast<uint16_t>(strtoul(local.substr(colon + 1).c_str(), nullptr, 16));
      Listener l;
      bool any = true;
      if (!v6) {
        auto* a = reinterpret_cast<sockaddr_in*>(&l.address);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        // /proc prints the address as the u32 it is in memory: loading it back restores it.
        a->sin_addr.s_addr =
            static_cast<uint32_t>(strtoul(local.substr(0, 8).c_str(), nullptr, 16));
        any = a->sin_addr.s_addr == htonl(INADDR_ANY);
        if (any) a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        l.length = sizeof(sockaddr_in);
      } else {
        auto* a = reinterpret_cast<sockaddr_in6*>(&l.address);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        for (int i = 0; i < 4; ++i) {
          uint32_t word = static_cast<uint32_t>(
              strtoul(local.substr(static_cast<size_t>(8 * i), 8).c_str(), nullptr, 16));
          memcpy(&a->sin6_addr.s6_addr[4 * i], &word, 4);
        }
        any = IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr);
        if (any) a->sin6_addr = in6addr_loopback;
        l.length = sizeof(sockaddr_in6);
      }
      l.wildcard = any;
      found.emplace(inode, l);
    }
  }
  return found;
}

class Attack {
 public:
  Attack(pid_t target, int stop_fd, int ready_fd)
      : target_(target), stop_(stop_fd), ready_(ready_fd) {}

  AttackReport run() {
    std::map<unsigned long, Listener> known;
    for (;;) {
      auto now = Clock::now();
      for (auto& [inode, l] : listeners_of(socket_inodes(target_))) {
        auto it = known.find(inode);
        const bool first = it == known.end();
        if (first) {
          it = known.emplace(inode, l).first;
          ++report_.listeners;
          if (l.wildcard) ++report_.wildcard;
        }
        if (now >= it->second.next_wave) {
          // The full flood at the first listeners (the rendezvous, the transport's); the many
          // that splits open later get a smaller one, so the attacker's own descriptors last.
          wave(l, first ? (report_.listeners <= 2 ? kFirstFlood : 3 * kLaterFlood) : kLaterFlood);
          it->second.next_wave = now + kWaveEvery;
          if (first && ready_ >= 0) {
            [[maybe_unused]] ssize_t n = write(ready_, "R", 1);
            ::close(ready_);
            ready_ = -1;
          }
        }
      }
      if (!step(milliseconds(10))) break;  // told to stop
    }
    for (Conn& c : conns_) {
      ++report_.held;
      ::close(c.fd);
    }
    report_.ok = true;
    return report_;
  }

 private:
  void wave(const Listener& l, int flood) {
    for (Kind k : {Kind::kWrongSecret, Kind::kPeerHello, Kind::kGarbage, Kind::kHalfHello,
                   Kind::kTrickle, Kind::kOversize}) {
      open(l, k);
    }
    for (int i = 0; i < flood; ++i) open(l, Kind::kFlood);
  }

  void open(const Listener& l, Kind kind) {
    if (conns_.size() >= kMaxOpen) return;
    int fd = ::socket(l.address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    ++report_.tried;
    Conn c;
    c.fd = fd;
    c.kind = kind;
    c.payload = payload_of(kind);
    c.opened = c.next_byte = Clock::now();
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&l.address), l.length) == 0) {
      c.connected = true;
    } else if (errno != EINPROGRESS) {
      ++report_.refused;
      ::close(fd);
      return;
    }
    conns_.push_back(std::move(c));
  }

  // Sends what is due, notices what the rank did; false once the stop pipe closed.
  bool step(milliseconds slice) {
    std::vector<pollfd> fds{{stop_, POLLIN, 0}};
    for (const Conn& c : conns_) {
      short events = c.connected ? static_cast<short>(POLLIN | POLLRDHUP) : POLLOUT;
      fds.push_back({c.fd, events, 0});
    }
    ::poll(fds.data(), fds.size(), static_cast<int>(slice.count()));
    if (fds[0].revents != 0) return false;
    const auto now = Clock::now();
    std::vector<Conn> keep;
    for (size_t i = 0; i < conns_.size(); ++i) {
      Conn& c = conns_[i];
      const short rev = fds[i + 1].revents;
      bool done = false;
      if (!c.connected && rev != 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          ++report_.refused;
          done = true;
        } else {
          c.connected = true;
        }
      } else if (c.connected && rev != 0) {
        char buf[64];
        ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
          ++report_.answered;
          done = true;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          ++report_.dropped;
          done = true;
        }
      }
      if (!done && c.connected && c.sent < c.payload.size() && now >= c.next_byte) {
        const bool trickle = c.kind == Kind::kTrickle;
        size_t len = trickle ? 1 : c.payload.size() - c.sent;
        ssize_t n = ::send(c.fd, c.payload.data() + c.sent, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) c.sent += static_cast<size_t>(n);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
          ++report_.dropped;  // reset by the rank
          done = true;
        }
        c.next_byte = now + kTrickleEvery;
      }
      if (!done && now - c.opened >= kHoldAtMost) {
        ++report_.held;
        done = true;
      }
      if (done) {
        ::close(c.fd);
      } else {
        keep.push_back(std::move(c));
      }
    }
    conns_ = std::move(keep);
    return true;
  }

  pid_t target_;
  int stop_;
  int ready_;
  std::vector<Conn> conns_;
  AttackReport report_;
};

// Everything inherited is closed: the attacker holds no socket of the rank's (the launcher's
// listening socket least of all) and no pipe of the launcher's.
void close_inherited(const std::set<int>& keep) {
  std::vector<int> fds;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd > 2 && fd != dirfd(d) && !keep.count(fd)) fds.push_back(fd);
  }
  closedir(d);
  for (int fd : fds) ::close(fd);
}

}  // namespace

Attacker::Attacker(pid_t target) {
  int stop[2], ready[2], report[2];
  if (pipe2(stop, O_CLOEXEC) != 0 || pipe2(ready, O_CLOEXEC) != 0 ||
      pipe2(report, O_CLOEXEC) != 0) {
    perror("hostile_check: pipe");
    return;
  }
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(120);  // never outlive a broken test
    close_inherited({stop[0], ready[1], report[1]});
    AttackReport r = Attack(target, stop[0], ready[1]).run();
    [[maybe_unused]] ssize_t n = write(report[1], &r, sizeof(r));
    _exit(0);
  }
  ::close(stop[0]);
  ::close(ready[1]);
  ::close(report[1]);
  stop_fd_ = stop[1];
  ready_fd_ = ready[0];
  report_fd_ = report[0];
}

Attacker::~Attacker() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  for (int fd : {stop_fd_, ready_fd_, report_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

bool Attacker::wait_first_wave(int timeout_ms) {
  pollfd p{ready_fd_, POLLIN, 0};
  char byte = 0;
  return ::poll(&p, 1, timeout_ms) == 1 && read(ready_fd_, &byte, 1) == 1;
}

AttackReport Attacker::stop(int timeout_ms) {
  AttackReport r;
  if (pid_ <= 0) return r;
  ::close(stop_fd_);
  stop_fd_ = -1;
  pollfd p{report_fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) == 1 && read(report_fd_, &r, sizeof(r)) != sizeof(r)) r = {};
  kill(pid_, SIGKILL);  // it has exited, or failed to report in time
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return r;
}

}  // namespace ccl::hostile
