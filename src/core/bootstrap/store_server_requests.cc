// StoreServer's request side: the hello, then SET/GET/ADD/WAIT, parking GET and WAIT until their
// keys exist, and replies written without ever blocking the server thread.
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/bootstrap/store_server_impl.h"
#include "base/error.h"
#include "base/log.h"

namespace ccl {

using namespace store_wire;
using namespace store_server_detail;

void StoreServer::Impl::on_hello(Client& c) {
  // The magic and the version are judged as soon as they arrive: garbage is dropped at once
  // instead of being waited for until the hello deadline.
  if (c.in.size() >= 4 && get_u32(c.in.data()) != kHelloMagic) {
    drop(c, "not a ccl store client (bad magic)", true);
    return;
  }
  if (c.in.size() >= 8 && get_u32(c.in.data() + 4) != kVersion) {
    drop(c,
         "protocol version " + std::to_string(get_u32(c.in.data() + 4)) + ", expected " +
             std::to_string(kVersion),
         true);
    return;
  }
  if (c.in.size() < kHelloBytes) return;
  Hello h = decode_hello(c.in.data());
  const std::string why = hello_problem(h, secret, expected);
  if (!why.empty()) {
    drop(c, why, true);
    return;
  }
  expected = h.nranks;
  c.authenticated = true;
  c.rank = h.rank;
  c.need = 1;
  c.in.erase(c.in.begin(), c.in.begin() + kHelloBytes);
  --pending;
  ++authenticated;
  seen_ranks.insert(h.rank);
  CCL_TRACE(kBootstrap, "store server: rank %d of %d connected from %s", h.rank, h.nranks,
            c.peer.c_str());
}

void StoreServer::Impl::process(Client& c) {
  while (!c.closing && !c.parked && c.out.empty() && c.in.size() >= c.need) {
    Request r;
    size_t consumed = 0, need = 0;
    std::string error;
    switch (parse_request(c.in.data(), c.in.size(), &r, &consumed, &need, &error)) {
      case Parse::kInvalid:
        drop(c, "malformed request: " + error, true);
        return;
      case Parse::kIncomplete:
        c.need = need;
        return;
      case Parse::kComplete:
        c.need = 1;
        c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(consumed));
        execute(c, r);
        break;
    }
  }
}

void StoreServer::Impl::execute(Client& c, Request& r) {
  switch (r.op) {
    case Op::kSet:
      data[r.key] = std::move(r.value);
      reply(c, Bytes{kStatusOk});
      key_changed(r.key);
      return;
    case Op::kGet: {
      auto it = data.find(r.key);
      if (it == data.end()) {
        c.parked = true;
        c.parked_op = Op::kGet;
        c.parked_keys = {r.key};
        c.missing = 1;
        waiters[r.key].push_back(c.id);
        return;
      }
      Bytes out{kStatusOk};
      put_u32(out, static_cast<uint32_t>(it->second.size()));
      out.insert(out.end(), it->second.begin(), it->second.end());
      reply(c, std::move(out));
      return;
    }
    case Op::kAdd: {
      Bytes& stored = data[r.key];
      // Same encoding as InMemoryStore: 8 bytes (little-endian); anything else counts as 0.
      uint64_t value = stored.size() == 8 ? get_u64(stored.data()) : 0;
      value += static_cast<uint64_t>(r.delta);  // unsigned: wraps instead of overflowing
      stored.clear();
      put_u64(stored, value);
      Bytes out{kStatusOk};
      put_u64(out, value);
      reply(c, std::move(out));
      key_changed(r.key);
      return;
    }
    case Op::kWait: {
      std::unordered_set<std::string> missing;
      for (auto& k : r.keys) {
        if (!data.contains(k)) missing.insert(std::move(k));
      }
      if (missing.empty()) {
        reply(c, Bytes{kStatusOk});
        return;
      }
      c.parked = true;
      c.parked_op = Op::kWait;
      c.parked_keys.assign(missing.begin(), missing.end());
      c.missing = missing.size();
      for (const auto& k : c.parked_keys) waiters[k].push_back(c.id);
      return;
    }
  }
}

void StoreServer::Impl::key_changed(const std::string& key) {
  auto node = waiters.extract(key);
  if (node.empty()) return;
  for (uint64_t id : node.mapped()) {
    auto it = clients.find(id);
    if (it == clients.end() || it->second.closing || !it->second.parked) continue;
    Client& c = it->second;
    if (--c.missing > 0) continue;
    c.parked = false;
    c.parked_keys.clear();
    if (c.parked_op == Op::kGet) {
      const Bytes& value = data[key];
      Bytes out{kStatusOk};
      put_u32(out, static_cast<uint32_t>(value.size()));
      out.insert(out.end(), value.begin(), value.end());
      reply(c, std::move(out));
    } else {
      reply(c, Bytes{kStatusOk});
    }
    ready.push_back(id);  // it may have pipelined more; run that from the main loop, not here
  }
}

void StoreServer::Impl::reply(Client& c, Bytes&& bytes) {
  if (c.out.empty()) {
    c.out = std::move(bytes);
    c.out_sent = 0;
  } else {
    c.out.insert(c.out.end(), bytes.begin(), bytes.end());
  }
  flush(c);
}

void StoreServer::Impl::flush(Client& c) {
  while (c.out_sent < c.out.size()) {
    ssize_t n = ::send(c.socket.fd(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    drop(c, n < 0 ? strerror(errno) : "send returned 0", false);
    return;
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.in.size() >= c.need) ready.push_back(c.id);
}

void StoreServer::Impl::drop(Client& c, const std::string& why, bool warn) {
  if (c.closing) return;
  c.closing = true;
  // A flood must not become a flood of log lines: strangers beyond the first few are traced.
  const bool stranger = !c.authenticated;
  if (stranger && ++strangers_dropped > kStrangersLogged) warn = false;
  if (warn && !quiet()) {
    CCL_WARN(kBootstrap, "store server %s: dropping connection from %s (rank %d): %s%s",
             address.to_string().c_str(), c.peer.c_str(), c.rank, why.c_str(),
             stranger && strangers_dropped == kStrangersLogged
                 ? " (further strangers are dropped without a warning)"
                 : "");
  } else if (!quiet()) {
    CCL_TRACE(kBootstrap, "store server: connection from %s (rank %d) ended: %s", c.peer.c_str(),
              c.rank, why.c_str());
  }
  if (c.parked) {
    for (const auto& k : c.parked_keys) {
      auto it = waiters.find(k);
      if (it == waiters.end()) continue;
      std::erase(it->second, c.id);
      if (it->second.empty()) waiters.erase(it);
    }
  }
  if (c.authenticated) {
    if (--authenticated == 0) idle_since = Clock::now();
  } else {
    --pending;
  }
  c.socket.close();
}

}  // namespace ccl
