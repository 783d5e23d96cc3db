// StoreServer (tcp_store.h): one thread, one poll() over a wake-up eventfd, the listener and every
// client. All sockets are non-blocking and every client has its own input and output buffer, so a
// slow, stalled or hostile client costs the others nothing but a slot in the poll set.
//
// A client first sends a hello (secret, rank, nranks) within kHelloTimeout; then requests, which
// are answered in order. A GET or WAIT whose keys are missing is parked until a SET or ADD makes
// them exist. A client's next request is only parsed once the previous reply is fully sent, which
// bounds what a client that never reads can make us buffer.
//
// Until its hello is checked a connection is a stranger: it may make us buffer no more than a
// hello, it is dropped at its first wrong magic or version byte or at its hello deadline, and
// strangers together hold at most max_pending descriptors (the oldest goes first), so that neither
// garbage, a slow trickle nor a flood of connections keeps a real rank out.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/bootstrap/store_server_impl.h"
#include "base/error.h"
#include "base/log.h"

namespace ccl {

namespace {

using namespace store_wire;
using namespace store_server_detail;

constexpr size_t kReadChunk = 64 * 1024;
constexpr int kBacklog = 1024;
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after EMFILE and the like

}  // namespace

void StoreServer::Impl::run() {
  try {
    loop();
  } catch (const std::exception& e) {
    if (!quiet())
      CCL_WARN(kBootstrap, "store server %s failed: %s", address.to_string().c_str(), e.what());
  }
  clients.clear();
  listener.close();  // late connections are refused at once rather than left hanging
  {
    std::lock_guard<std::mutex> lock(mutex);
    finished = true;
  }
  finished_cv.notify_all();
}

void StoreServer::Impl::loop() {
  idle_since = Clock::now();
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stop_requested) {
    auto now = Clock::now();
    fds.clear();
    ids.clear();
    fds.push_back({wake_fd, POLLIN, 0});
    const bool accepting = now >= accept_paused_until;
    fds.push_back({accepting ? listener.fd() : -1, POLLIN, 0});
    for (auto& [id, c] : clients) {
      short events = POLLRDHUP;
      if (c.in.size() < input_cap(c)) events |= POLLIN;
      if (c.out_sent < c.out.size()) events |= POLLOUT;
      fds.push_back({c.socket.fd(), events, 0});
      ids.push_back(id);
    }
    int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(now));
    if (rc < 0 && errno != EINTR) throw_system_error(errno, "store server poll");
    if (fds[0].revents != 0) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_fd, &count, sizeof(count));
    }
    if (stop_requested) return;
    if (rc > 0 && (fds[1].revents & POLLIN)) accept_all();
    for (size_t i = 0; rc > 0 && i < ids.size(); ++i) {
      short revents = fds[i + 2].revents;
      if (revents == 0) continue;
      auto it = clients.find(ids[i]);
      if (it == clients.end() || it->second.closing) continue;
      Client& c = it->second;
      if (revents & POLLNVAL) {
        drop(c, "invalid descriptor", true);
        continue;
      }
      if (revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) read_from(c, revents);
      if (!c.closing && (revents & POLLOUT)) flush(c);
    }
    while (!ready.empty()) {
      auto it = clients.find(ready.front());
      ready.pop_front();
      if (it != clients.end() && !it->second.closing) process(it->second);
    }
    now = Clock::now();
    for (auto& [id, c] : clients) {
      if (!c.authenticated && !c.closing && now >= c.hello_deadline) {
        drop(c, "no hello within " + std::to_string(kHelloTimeout.count()) + " s", true);
      }
    }
    std::erase_if(clients, [](const auto& entry) { return entry.second.closing; });
    const char* why = nullptr;
    if (done(now, &why)) {
      CCL_INFO(kBootstrap,
               "store server %s finished: %s (strangers: %zu dropped, %zu closed at the end)",
               address.to_string().c_str(), why, strangers_dropped, pending);
      return;
    }
  }
}

bool StoreServer::Impl::done(Clock::time_point now, const char** why) {
  if (authenticated > 0) return false;
  if (expected > 0 && seen_ranks.size() >= static_cast<size_t>(expected)) {
    *why = "every rank connected and disconnected";
    return true;
  }
  if (idle_timeout.count() > 0 && now - idle_since >= idle_timeout) {
    *why = "idle timeout with no client connected";
    return true;
  }
  return false;
}

int StoreServer::Impl::poll_timeout_ms(Clock::time_point now) const {
  // Wake up for the earliest of: a hello deadline, the idle timeout, the end of an accept pause.
  auto next = now + std::chrono::seconds(1);
  if (authenticated == 0 && idle_timeout.count() > 0)
    next = std::min(next, idle_since + idle_timeout);
  if (now < accept_paused_until) next = std::min(next, accept_paused_until);
  if (pending > 0) {
    for (const auto& [id, c] : clients) {
      if (!c.authenticated) next = std::min(next, c.hello_deadline);
    }
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  return static_cast<int>(std::max<int64_t>(ms, 0));
}

void StoreServer::Impl::accept_all() {
  // Bounded per round so that a connection flood cannot starve the clients already connected.
  for (int round = 0; round < 64; ++round) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      // Out of descriptors or memory. If strangers hold some, lower their cap below what they
      // hold and give up the oldest, then go on accepting at full speed: real ranks queued
      // behind a flood must get in. Otherwise pause accepting for a moment (poll would report
      // the listener ready forever).
      if (pending == 0) {
        CCL_WARN(kBootstrap, "store server %s: accept: %s", address.to_string().c_str(),
                 strerror(err));
        accept_paused_until = Clock::now() + kAcceptPause;
        return;
      }
      max_pending = std::max<size_t>(1, pending - (pending + 3) / 4);
      CCL_WARN(kBootstrap,
               "store server %s: accept: %s; at most %zu connections may now wait for a hello",
               address.to_string().c_str(), strerror(err), max_pending);
      while (pending >= max_pending && drop_oldest_pending("out of descriptors")) {
      }
      continue;
    }
    if (pending >= max_pending) drop_oldest_pending("too many connections without a hello");
    Client c;
    c.id = next_id++;
    c.socket = Socket(fd);
    c.socket.set_nodelay(true);
    try {
      c.peer = c.socket.peer_address().to_string();
    } catch (const Error&) {
      c.peer = "(unknown peer)";
    }
    c.hello_deadline = Clock::now() + kHelloTimeout;
    c.need = kHelloBytes;
    ++pending;
    uint64_t id = c.id;
    // A real rank sends its hello right after connecting: read it now, so that it is checked
    // before a flood of later connections can push this one out as the oldest stranger.
    Client& added = clients.emplace(id, std::move(c)).first->second;
    read_from(added, POLLIN);
  }
}

bool StoreServer::Impl::drop_oldest_pending(const char* why) {
  for (auto& [id, c] : clients) {  // ordered by id: the oldest first
    if (!c.authenticated && !c.closing) {
      drop(c, why, true);
      return true;
    }
  }
  return false;
}

void StoreServer::Impl::read_from(Client& c, short revents) {
  if (c.in.size() >= input_cap(c) && (revents & (POLLRDHUP | POLLHUP | POLLERR))) {
    // Not reading (its buffer is full until it reads our reply), and it has hung up.
    drop(c, "closed", false);
    return;
  }
  // A bounded number of reads per wake-up keeps one fast sender from starving the rest.
  for (int i = 0; i < 16; ++i) {
    size_t room = input_cap(c) - c.in.size();
    if (room == 0) break;
    size_t chunk = std::min(room, kReadChunk);
    size_t old = c.in.size();
    c.in.resize(old + chunk);
    ssize_t n = ::recv(c.socket.fd(), c.in.data() + old, chunk, MSG_DONTWAIT);
    c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) continue;
    if (n == 0) {
      drop(c, "closed", false);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    drop(c, strerror(errno), false);
    return;
  }
  if (!c.authenticated) on_hello(c);
  if (c.authenticated && !c.closing) process(c);
}

size_t store_server_detail::max_pending_connections() {
  rlimit nofile{};
  rlim_t limit = 1024;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    limit = nofile.rlim_cur;
  return static_cast<size_t>(std::clamp<rlim_t>(limit / 8, 16, 256));
}

// ---- StoreServer ----

StoreServer::StoreServer() : impl_(std::make_unique<Impl>()) {}

StoreServer::~StoreServer() {
  if (::getpid() != impl_->owner_pid && impl_->thread.joinable()) {
    // A forked child: the thread's state may have been copied mid-update; leave it alone. The
    // pointer is kept where leak checkers can see it, since leaking it is the intent.
    static std::vector<Impl*>* abandoned = new std::vector<Impl*>;
    impl_->thread.detach();
    abandoned->push_back(impl_.release());
    return;
  }
  stop();
  if (impl_->wake_fd >= 0) ::close(impl_->wake_fd);
}

std::unique_ptr<StoreServer> StoreServer::start(const SocketAddress& address, const Secret& secret,
                                                std::chrono::milliseconds idle_timeout,
                                                int listen_fd) {
  std::unique_ptr<StoreServer> server(new StoreServer());
  Impl& s = *server->impl_;
  if (listen_fd >= 0) {
    s.listener = Socket(listen_fd);
    // Harmless if the launcher already listens; needed if it only bound.
    if (::listen(listen_fd, kBacklog) != 0) throw_system_error(errno, "listen on fd %d", listen_fd);
  } else {
    s.listener = Socket::listen(address, kBacklog);
  }
  s.listener.set_nonblocking(true);
  s.address = s.listener.local_address();
  if (s.address.is_wildcard()) {
    CCL_WARN(kBootstrap,
             "store server listens on every address (%s): give the rendezvous the address of "
             "one interface so that it is reachable only there",
             s.address.to_string().c_str());
  }
  if (secret == Secret{}) {
    CCL_WARN(kBootstrap,
             "store server %s has no secret (CCL_COMM_SECRET unset?): any process that reaches "
             "it can join",
             s.address.to_string().c_str());
  }
  s.max_pending = max_pending_connections();
  s.secret = secret;
  s.idle_timeout = idle_timeout;
  s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.wake_fd < 0) throw_system_error(errno, "eventfd");
  s.owner_pid = ::getpid();
  s.thread = std::thread([&s] { s.run(); });
  CCL_INFO(kBootstrap, "store server listening on %s", s.address.to_string().c_str());
  return server;
}

SocketAddress StoreServer::address() const { return impl_->address; }

bool StoreServer::finished() const { return impl_->finished.load(); }

void StoreServer::stop() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  if (::getpid() != s.owner_pid) {
    // A forked child holds a copy of this object but not the thread: joining would wait forever.
    s.thread.detach();
    return;
  }
  s.stop_requested = true;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(s.wake_fd, &one, sizeof(one));
  if (s.thread.get_id() == std::this_thread::get_id()) {
    s.thread.detach();
  } else {
    s.thread.join();
  }
}

void StoreServer::wait_finished(Deadline deadline) {
  if (::getpid() != impl_->owner_pid) return;  // a forked child: no thread will ever finish it
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->finished_cv.wait_until(lock, deadline.at(), [this] { return impl_->finished.load(); });
}

// ---- adopted servers ----

namespace {

struct AdoptedServers {
  std::mutex mutex;
  std::vector<std::unique_ptr<StoreServer>> servers;
  ~AdoptedServers() {
    // At exit: give servers still in use a moment to answer ranks that are just leaving (the
    // hosting rank may exit as soon as its own init returned), then stop rather than wait, so
    // that a job whose ranks never came cannot hang exit().
    std::lock_guard<std::mutex> lock(mutex);
    Deadline drain = Deadline::after(std::chrono::milliseconds(2000));
    for (auto& s : servers) s->wait_finished(drain);
    for (auto& s : servers) s->stop();
    servers.clear();
  }
};

AdoptedServers& adopted() {
  static AdoptedServers list;
  return list;
}

}  // namespace

cclUniqueId start_adopted_rendezvous(std::chrono::milliseconds idle_timeout) {
  UniqueIdContents contents;
  contents.secret = random_secret();
  const NetInterface iface = choose_interface();
  auto server = StoreServer::start(iface.address, contents.secret, idle_timeout);
  contents.root = server->address();
  CCL_INFO(kBootstrap, "unique id: rendezvous at %s (%s)", contents.root.to_string().c_str(),
           iface.name.c_str());
  adopt_store_server(std::move(server));
  return encode_unique_id(contents);
}

void adopt_store_server(std::unique_ptr<StoreServer> server) {
  auto& list = adopted();
  std::vector<std::unique_ptr<StoreServer>> finished;
  {
    std::lock_guard<std::mutex> lock(list.mutex);
    for (auto& s : list.servers) {
      if (s->finished()) finished.push_back(std::move(s));
    }
    std::erase(list.servers, nullptr);
    if (server) list.servers.push_back(std::move(server));
  }
  finished.clear();  // joins threads that have already ended, outside the lock
}

}  // namespace ccl
