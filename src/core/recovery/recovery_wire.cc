#include "core/recovery/recovery_wire.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace ccl::recovery {

Hello make_hello(Ask ask, const CommName& comm, int to, int from, uint64_t seq) {
  Hello h;
  h.ask = static_cast<uint32_t>(ask);
  memcpy(h.comm_tag, comm.tag.data(), std::min(comm.tag.size(), sizeof(h.comm_tag)));
  memcpy(h.key, comm.key.data(), sizeof(h.key));
  h.to = to;
  h.from = from;
  h.seq = seq;
  return h;
}

std::string tag_of(const Hello& hello) {
  return std::string(hello.comm_tag, strnlen(hello.comm_tag, sizeof(hello.comm_tag)));
}

void send_hello(Socket& socket, const Hello& hello, Deadline deadline) {
  socket.send_all(&hello, sizeof(hello), deadline);
}

Socket open_with_hello(const SocketAddress& listener, const Hello& hello, Deadline deadline) {
  Socket s = Socket::connect_once(listener, deadline);
  if (!s.valid()) return s;
  try {
    send_hello(s, hello, deadline);
  } catch (const Error& e) {
    if (e.code() == cclTimeout) throw;
    return Socket();
  }
  return s;
}

Hello recv_hello(Socket& socket, Deadline deadline) {
  Hello h;
  socket.recv_all(&h, sizeof(h), deadline);
  if (h.magic != Hello::kMagic || h.ask < 1 || h.ask > 4) {
    throw_error(cclInternalError, "recovery: not a recovery hello");
  }
  return h;
}

void send_vote(Socket& socket, const Vote& vote, Deadline deadline) {
  const uint32_t header[3] = {static_cast<uint32_t>(vote.flag),
                              static_cast<uint32_t>(vote.failed.size()),
                              static_cast<uint32_t>(vote.extra.size())};
  std::vector<uint8_t> bytes(sizeof(header) + vote.failed.size() * 4 + vote.extra.size());
  memcpy(bytes.data(), header, sizeof(header));
  if (!vote.failed.empty()) {
    memcpy(bytes.data() + sizeof(header), vote.failed.data(), vote.failed.size() * 4);
  }
  if (!vote.extra.empty()) {
    memcpy(bytes.data() + sizeof(header) + vote.failed.size() * 4, vote.extra.data(),
           vote.extra.size());
  }
  socket.send_all(bytes.data(), bytes.size(), deadline);
}

Vote recv_vote(Socket& socket, Deadline deadline) {
  uint32_t header[3];
  socket.recv_all(header, sizeof(header), deadline);
  if (header[1] > kMaxFailed || header[2] > kMaxExtra) {
    throw_error(cclInternalError, "recovery: a vote of %u ranks and %u bytes", header[1],
                header[2]);
  }
  Vote vote;
  vote.flag = static_cast<int32_t>(header[0]);
  vote.failed.resize(header[1]);
  vote.extra.resize(header[2]);
  if (!vote.failed.empty()) socket.recv_all(vote.failed.data(), vote.failed.size() * 4, deadline);
  if (!vote.extra.empty()) socket.recv_all(vote.extra.data(), vote.extra.size(), deadline);
  return vote;
}

void send_reply(Socket& socket, Reply reply, const Vote* decision, Deadline deadline) {
  const auto code = static_cast<uint32_t>(reply);
  socket.send_all(&code, sizeof(code), deadline);
  if (reply == Reply::kDecision) send_vote(socket, *decision, deadline);
}

Reply recv_reply(Socket& socket, Vote* decision, Deadline deadline) {
  uint32_t code = 0;
  socket.recv_all(&code, sizeof(code), deadline);
  if (code == static_cast<uint32_t>(Reply::kUnknown)) return Reply::kUnknown;
  if (code != static_cast<uint32_t>(Reply::kDecision)) {
    throw_error(cclInternalError, "recovery: reply %u", code);
  }
  *decision = recv_vote(socket, deadline);
  return Reply::kDecision;
}

}  // namespace ccl::recovery
