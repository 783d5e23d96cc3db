#include "core/recovery/recovery_listener.h"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/log.h"

namespace ccl::recovery {

namespace {
// How many closed communicators' decisions stay answerable.
constexpr size_t kKeptClosed = 64;
// A client sends its hello and vote right after connecting: a slow one is dropped.
constexpr auto kReadTimeout = std::chrono::milliseconds(1000);
// Answers to watchers are a few bytes on a local or idle socket.
constexpr auto kAnswerTimeout = std::chrono::milliseconds(200);
}  // namespace

Vote Endpoint::record(uint64_t seq, const Vote& decision) {
  std::lock_guard lock(mutex);
  // The first decision recorded wins (no structured binding: clang 14 cannot capture one).
  const auto it = decided.emplace(seq, decision).first;
  auto answer = [&](Socket& s) {
    try {
      send_reply(s, Reply::kDecision, &it->second, Deadline::after(kAnswerTimeout));
    } catch (const Error&) {
      // The asker is gone; nothing to tell.
    }
  };
  // Coordinators that watch this rank, and participants that took this rank for the coordinator
  // (their coordinator died after telling this rank only): the decision is theirs too.
  if (auto watching = watches.find(seq); watching != watches.end()) {
    for (Socket& s : watching->second) answer(s);
    watches.erase(watching);
  }
  if (auto asking = submits.find(seq); asking != submits.end()) {
    for (Submission& s : asking->second) answer(s.socket);
    submits.erase(asking);
  }
  return it->second;
}

namespace {

// The listener of this process. A child forked from it (a Python DataLoader worker, say) must
// not keep the parent's listening socket and held connections open: a survivor would then see
// the parent's port accept and its connections stay up after the parent died. The fork handlers
// close them in the child (no listener thread exists there), which makes its own on first use;
// the parent's copy stays allocated there (its thread is gone), reachable from `abandoned`.
struct Process {
  std::mutex mutex;
  Listener* listener = nullptr;
  pid_t owner = 0;
  std::vector<Listener*> abandoned;
  ~Process() {
    if (listener != nullptr && owner == getpid()) delete listener;
  }
};
Process& process() {
  static Process p;
  return p;
}

}  // namespace

Listener& Listener::instance() {
  Process& p = process();
  std::lock_guard lock(p.mutex);
  if (p.listener != nullptr && p.owner != getpid()) {
    p.abandoned.push_back(p.listener);
    p.listener = nullptr;
  }
  if (p.listener == nullptr) {
    static const bool handlers = [] {
      pthread_atfork(
          [] {
            process().mutex.lock();
            if (process().listener) process().listener->before_fork();
          },
          [] {
            if (process().listener) process().listener->after_fork(false);
            process().mutex.unlock();
          },
          [] {
            if (process().listener) process().listener->after_fork(true);
            process().mutex.unlock();
          });
      return true;
    }();
    (void)handlers;
    p.listener = new Listener();
    p.owner = getpid();
  }
  return *p.listener;
}

void Listener::before_fork() {
  mutex_.lock();
  for (auto& [key, endpoint] : endpoints_) endpoint->mutex.lock();
}

void Listener::after_fork(bool in_child) {
  for (auto& [key, endpoint] : endpoints_) {
    if (in_child) {
      // Close the descriptors here only (the parent's sockets stay open in the parent).
      for (Socket& s : endpoint->holds) ::close(s.release());
      for (auto& [seq, sockets] : endpoint->watches) {
        for (Socket& s : sockets) ::close(s.release());
      }
      for (auto& [seq, submissions] : endpoint->submits) {
        for (Endpoint::Submission& s : submissions) ::close(s.socket.release());
      }
      endpoint->holds.clear();
      endpoint->watches.clear();
      endpoint->submits.clear();
      endpoint->on_revoke = nullptr;
      endpoint->closed = true;
    }
    endpoint->mutex.unlock();
  }
  if (in_child) {
    ::close(socket_.release());
    // thread_ names the parent's thread, which does not exist here: this object is abandoned,
    // never destroyed (instance() makes the child its own listener).
  }
  mutex_.unlock();
}

Listener::Listener() {
  SocketAddress address = choose_interface().address;
  address.set_port(0);
  socket_ = Socket::listen(address);
  address_ = socket_.local_address();
  thread_ = std::thread([this] { run(); });
  CCL_INFO(kInit, "recovery listener on %s", address_.to_string().c_str());
}

Listener::~Listener() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Endpoint> Listener::open(const CommName& comm, int rank,
                                         std::function<void(int from)> on_revoke) {
  auto endpoint = std::make_shared<Endpoint>();
  endpoint->on_revoke = std::move(on_revoke);
  endpoint->key = comm.key;
  std::lock_guard lock(mutex_);
  endpoints_[{comm.tag, rank}] = endpoint;
  return endpoint;
}

void Listener::close(const std::string& tag, int rank) {
  std::shared_ptr<Endpoint> endpoint;
  {
    std::lock_guard lock(mutex_);
    auto it = endpoints_.find({tag, rank});
    if (it == endpoints_.end()) return;
    endpoint = it->second;
    closed_.emplace_back(tag, rank);
    if (closed_.size() > kKeptClosed) {
      endpoints_.erase(closed_.front());
      closed_.erase(closed_.begin());
    }
  }
  std::lock_guard lock(endpoint->mutex);
  endpoint->closed = true;
  endpoint->on_revoke = nullptr;
  endpoint->holds.clear();
  endpoint->watches.clear();
  endpoint->submits.clear();
}

void Listener::run() {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    pollfd p{socket_.fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    try {
      serve(socket_.accept(Deadline::after(std::chrono::milliseconds(10))));
    } catch (const Error& e) {
      CCL_INFO(kInit, "recovery listener: dropped a connection: %s", e.what());
    }
  }
}

void Listener::serve(Socket socket) {
  const Deadline deadline = Deadline::after(kReadTimeout);
  const Hello hello = recv_hello(socket, deadline);
  const auto ask = static_cast<Ask>(hello.ask);
  Vote vote;
  if (ask == Ask::kSubmit) vote = recv_vote(socket, deadline);
  std::shared_ptr<Endpoint> endpoint;
  {
    std::lock_guard lock(mutex_);
    auto it = endpoints_.find({tag_of(hello), hello.to});
    if (it != endpoints_.end()) endpoint = it->second;
  }
  const Deadline answer = Deadline::after(kAnswerTimeout);
  Secret key;
  memcpy(key.data(), hello.key, key.size());
  if (endpoint && !secrets_equal(key, endpoint->key)) {
    CCL_INFO(kInit, "recovery listener: dropped a connection with a wrong key for %s rank %d",
             tag_of(hello).c_str(), hello.to);
    return;
  }
  if (!endpoint) {
    // No such communicator here (never made, or long gone): as good as a dead rank for the asker.
    if (ask == Ask::kSubmit || ask == Ask::kWatch)
      send_reply(socket, Reply::kUnknown, nullptr, answer);
    return;
  }
  std::lock_guard lock(endpoint->mutex);
  if (endpoint->closed && ask != Ask::kWatch && ask != Ask::kSubmit) return;
  if (ask == Ask::kSubmit || ask == Ask::kWatch) {
    // Both are answered by the agreement's decision: now if there is one (or "unknown" once the
    // communicator is gone), else when Endpoint::record() makes it.
    auto decided = endpoint->decided.find(hello.seq);
    if (decided != endpoint->decided.end()) {
      send_reply(socket, Reply::kDecision, &decided->second, answer);
    } else if (endpoint->closed) {
      send_reply(socket, Reply::kUnknown, nullptr, answer);
    } else if (ask == Ask::kSubmit) {
      endpoint->submits[hello.seq].push_back({hello.from, std::move(socket), std::move(vote)});
    } else {
      endpoint->watches[hello.seq].push_back(std::move(socket));
    }
    return;
  }
  if (ask == Ask::kRevoke) {
    if (endpoint->on_revoke) endpoint->on_revoke(hello.from);
  } else {
    endpoint->holds.push_back(std::move(socket));  // kHold
  }
}

}  // namespace ccl::recovery
