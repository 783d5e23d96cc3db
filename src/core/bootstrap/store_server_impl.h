// StoreServer's internals, shared by store_server.cc (the poll loop, connections, lifetime) and
// store_server_requests.cc (hello and request handling). Only the server thread touches the
// state below the mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/bootstrap/store_protocol.h"
#include "core/bootstrap/tcp_store.h"

namespace ccl {

namespace store_server_detail {

using store_wire::Op;

constexpr auto kHelloTimeout = std::chrono::seconds(5);
constexpr size_t kInputCap = store_wire::kMaxRequestBytes + 64;
// Dropped strangers are logged one by one up to this many, then only counted: a flood must not
// become a flood of log lines.
constexpr size_t kStrangersLogged = 8;

// How many connections may wait for their hello at once: a share of the descriptor limit, since
// the server lives in a rank's process and a flood must not leave the communicator without
// descriptors; at the cap the oldest waiting connection makes room for the newest.
size_t max_pending_connections();

struct Client {
  uint64_t id = 0;
  Socket socket;
  std::string peer;
  bool authenticated = false;
  bool closing = false;
  Clock::time_point hello_deadline;
  int rank = -1;
  Bytes in;
  size_t need = 1;  // bytes to buffer before a parse can succeed
  Bytes out;
  size_t out_sent = 0;
  // The request waiting for keys, if any.
  bool parked = false;
  Op parked_op = Op::kGet;
  std::vector<std::string> parked_keys;  // GET: the key; WAIT: the distinct missing keys
  size_t missing = 0;
};

// Before its hello a connection may make us buffer only the hello itself.
inline size_t input_cap(const Client& c) {
  return c.authenticated ? kInputCap : store_wire::kHelloBytes;
}

}  // namespace store_server_detail

struct StoreServer::Impl {
  using Client = store_server_detail::Client;
  using Request = store_wire::Request;
  Socket listener;
  int wake_fd = -1;
  Secret secret{};
  std::chrono::milliseconds idle_timeout{0};
  SocketAddress address;
  std::thread thread;
  pid_t owner_pid = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> finished{false};
  std::mutex mutex;
  std::condition_variable finished_cv;

  // Everything below belongs to the server thread.
  std::map<uint64_t, Client> clients;  // ordered by id, i.e. by age
  uint64_t next_id = 1;
  std::unordered_map<std::string, Bytes> data;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;
  std::deque<uint64_t> ready;  // clients whose buffered input may hold a request to run now
  int expected = -1;
  std::unordered_set<int> seen_ranks;
  size_t authenticated = 0, pending = 0;
  size_t max_pending = 256;
  size_t strangers_dropped = 0;  // connections dropped before a valid hello
  Clock::time_point idle_since;
  Clock::time_point accept_paused_until{};

  void run();
  void loop();
  void accept_all();
  bool drop_oldest_pending(const char* why);  // false if no connection waits for a hello
  void read_from(Client& c, short revents);
  void flush(Client& c);
  void on_hello(Client& c);
  void process(Client& c);
  void execute(Client& c, Request& r);
  void key_changed(const std::string& key);
  void reply(Client& c, Bytes&& bytes);
  void drop(Client& c, const std::string& why, bool warn);
  bool done(Clock::time_point now, const char** why);
  int poll_timeout_ms(Clock::time_point now) const;
  bool quiet() const { return stop_requested.load(); }
};

}  // namespace ccl
