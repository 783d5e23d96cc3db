// TcpStore (tcp_store.h): the client side of the store. One request at a time, each sent whole and
// answered in order. After any failure inside a request (timeout, abort, lost server) the reply
// stream can no longer be trusted, so the connection is closed and every later call fails with
// RemoteError: a store whose get() timed out is finished, like the communicator init it served.
#include "core/bootstrap/tcp_store.h"

#include <unistd.h>

#include "core/bootstrap/store_protocol.h"
#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

namespace ccl {

namespace {

using namespace store_wire;

// set() and add() are answered at once by a live server; they only need a generous bound.
Deadline internal_deadline() {
  int64_t seconds = config_int("CCL_TIMEOUT");
  if (seconds <= 0) return Deadline::never();
  return Deadline::after(std::chrono::seconds(seconds));
}

void check_key(const std::string& key) {
  if (key.size() > kMaxKeyBytes) {
    throw_error(cclInvalidArgument, "store key of %zu bytes is over the %zu-byte limit", key.size(),
                kMaxKeyBytes);
  }
}

}  // namespace

std::unique_ptr<TcpStore> TcpStore::connect(const SocketAddress& server, const Secret& secret,
                                            int rank, int nranks, Deadline deadline,
                                            const AbortFlag* abort) {
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
    throw_error(cclInvalidArgument, "store connect: rank %d of %d is not valid", rank, nranks);
  }
  Socket socket = Socket::connect(server, deadline, abort);
  Hello hello;
  hello.secret = secret;
  hello.rank = rank;
  hello.nranks = nranks;
  Bytes bytes = encode_hello(hello);
  socket.send_all(bytes.data(), bytes.size(), deadline, abort);
  CCL_TRACE(kBootstrap, "store client: rank %d of %d connected to %s", rank, nranks,
            server.to_string().c_str());
  return std::unique_ptr<TcpStore>(new TcpStore(std::move(socket), abort));
}

namespace {

// Sends `request` and receives its whole reply, closing the connection on any failure. Runs with
// the store's mutex held.
Reply round_trip(Socket& socket, const AbortFlag* abort, const Request& request, Deadline deadline,
                 const char* what, const std::string& key) {
  if (!socket.valid()) {
    throw_error(cclRemoteError,
                "store %s '%s': the connection to the store server was closed after an earlier "
                "error or timeout",
                what, key.c_str());
  }
  std::string server;
  try {
    server = socket.peer_address().to_string();
  } catch (const Error&) {
    server = "(unknown)";
  }
  try {
    Bytes bytes = encode_request(request);
    socket.send_all(bytes.data(), bytes.size(), deadline, abort);
    // Reads exactly what the reply is known to need so far: nothing past it is ever taken from
    // the socket, and parse_reply's bound on the length is checked before the value is read.
    Bytes in;
    size_t need = 1;
    for (;;) {
      const size_t have = in.size();
      in.resize(need);
      socket.recv_all(in.data() + have, need - have, deadline, abort);
      Reply reply;
      size_t consumed = 0;
      std::string error;
      switch (parse_reply(request.op, in.data(), in.size(), &reply, &consumed, &need, &error)) {
        case Parse::kComplete:
          return reply;
        case Parse::kInvalid:
          throw_error(cclRemoteError, "%s", error.c_str());
        case Parse::kIncomplete:
          break;
      }
    }
  } catch (const Error& e) {
    socket.close();
    const bool was_aborted = abort != nullptr && abort->load();
    const char* hint = e.code() == cclRemoteError && !was_aborted
                           ? " (the server is gone, or refused our secret or nranks)"
                           : "";
    if (e.code() == cclTimeout) {
      throw_error(cclTimeout, "store %s '%s' at %s: no answer before the deadline%s", what,
                  key.c_str(), server.c_str(),
                  request.op == Op::kGet || request.op == Op::kWait
                      ? " (the key was not set in time)"
                      : "");
    }
    throw_error(e.code(), "store %s '%s' at %s: %s%s", what, key.c_str(), server.c_str(), e.what(),
                hint);
  }
}

}  // namespace

void TcpStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  if (value.size() > kMaxValueBytes) {
    throw_error(cclInvalidArgument, "store value of %zu bytes is over the %zu-byte limit",
                value.size(), kMaxValueBytes);
  }
  Request r;
  r.op = Op::kSet;
  r.key = key;
  r.value = value;
  std::lock_guard<std::mutex> lock(mutex_);
  round_trip(socket_, abort_, r, internal_deadline(), "set", key);
}

Bytes TcpStore::get(const std::string& key, Deadline deadline) {
  check_key(key);
  Request r;
  r.op = Op::kGet;
  r.key = key;
  std::lock_guard<std::mutex> lock(mutex_);
  return round_trip(socket_, abort_, r, deadline, "get", key).value;  // an xvalue: moved
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  Request r;
  r.op = Op::kAdd;
  r.key = key;
  r.delta = delta;
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(
      round_trip(socket_, abort_, r, internal_deadline(), "add", key).counter);
}

void TcpStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  if (keys.size() > kMaxWaitKeys) {
    throw_error(cclInvalidArgument, "store wait for %zu keys is over the %u-key limit", keys.size(),
                kMaxWaitKeys);
  }
  size_t total = 1 + 4 + 4;
  for (const auto& k : keys) {
    check_key(k);
    total += 4 + k.size();
  }
  if (total > kMaxRequestBytes) {
    throw_error(cclInvalidArgument, "store wait request of %zu bytes is over the %zu-byte limit",
                total, kMaxRequestBytes);
  }
  if (keys.empty()) return;  // nothing to wait for, even past the deadline
  Request r;
  r.op = Op::kWait;
  r.keys = keys;
  std::lock_guard<std::mutex> lock(mutex_);
  round_trip(socket_, abort_, r, deadline, "wait", keys.front());
}

}  // namespace ccl
