#include "core/bootstrap/torch_store_client.h"

#include <utility>

#include "base/error.h"

namespace ccl {

namespace {

// A value larger than this is not a ccl unique id nor anything ccl asks for: refuse it rather
// than allocate what a stray server claims.
constexpr uint64_t kMaxValue = 1 << 20;

}  // namespace

TorchStoreClient TorchStoreClient::connect(const SocketAddress& address, Deadline deadline) {
  Socket s = Socket::connect(address, deadline);
  s.set_nodelay(true);
  TorchStoreClient client(std::move(s), address.to_string());
  const uint8_t q = kValidate;
  const uint32_t magic = kValidationMagic;
  client.send_bytes(&q, sizeof(q), deadline);
  client.send_bytes(&magic, sizeof(magic), deadline);
  return client;
}

template <class Io>
void TorchStoreClient::io_explained(Io io, const char* what) {
  try {
    io();
  } catch (const Error& e) {
    if (e.code() == cclRemoteError) {
      throw_error(cclRemoteError,
                  "torch's store at %s closed the connection during %s: ccl speaks the TCPStore "
                  "protocol of torch 2.x; with another torch, set CCL_COMM_ID=host:port so "
                  "that rank 0 serves ccl's own rendezvous there (%s)",
                  where_.c_str(), what, e.what());
    }
    if (e.code() == cclTimeout) {
      throw_error(cclTimeout, "torch's store at %s did not answer %s in time", where_.c_str(),
                  what);
    }
    throw;
  }
}

void TorchStoreClient::send_bytes(const void* data, size_t bytes, Deadline deadline) {
  // A server that hangs up on a query it does not know may be seen first by the next send
  // (EPIPE) or by the answer's receive (EOF): both name the protocol.
  io_explained([&] { socket_.send_all(data, bytes, deadline); }, "a query");
}

void TorchStoreClient::send_sized(const void* data, size_t bytes, Deadline deadline) {
  const uint64_t n = bytes;
  send_bytes(&n, sizeof(n), deadline);
  send_bytes(data, bytes, deadline);
}

void TorchStoreClient::recv_bytes(void* data, size_t bytes, Deadline deadline, const char* what) {
  io_explained([&] { socket_.recv_all(data, bytes, deadline); }, what);
}

void TorchStoreClient::set(const std::string& key, const std::vector<uint8_t>& value,
                           Deadline deadline) {
  const uint8_t q = kSet;
  send_bytes(&q, 1, deadline);
  send_sized(key.data(), key.size(), deadline);
  send_sized(value.data(), value.size(), deadline);
}

std::vector<uint8_t> TorchStoreClient::get(const std::string& key, Deadline deadline) {
  const uint8_t wait = kWait;
  const uint64_t one = 1;
  send_bytes(&wait, 1, deadline);
  send_bytes(&one, sizeof(one), deadline);
  send_sized(key.data(), key.size(), deadline);
  uint8_t answer = 0xff;
  recv_bytes(&answer, 1, deadline, ("a wait for " + key).c_str());
  if (answer != kStopWaiting) {
    throw_error(cclRemoteError, "torch's store at %s answered a wait for %s with %u, not %u",
                where_.c_str(), key.c_str(), answer, kStopWaiting);
  }
  const uint8_t get = kGet;
  send_bytes(&get, 1, deadline);
  send_sized(key.data(), key.size(), deadline);
  uint64_t n = 0;
  recv_bytes(&n, sizeof(n), deadline, ("a get of " + key).c_str());
  if (n > kMaxValue) {
    throw_error(cclRemoteError, "torch's store at %s claims %llu bytes for %s", where_.c_str(),
                static_cast<unsigned long long>(n), key.c_str());
  }
  std::vector<uint8_t> value(n);
  recv_bytes(value.data(), value.size(), deadline, ("a get of " + key).c_str());
  return value;
}

int64_t TorchStoreClient::add(const std::string& key, int64_t delta, Deadline deadline) {
  const uint8_t q = kAdd;
  send_bytes(&q, 1, deadline);
  send_sized(key.data(), key.size(), deadline);
  send_bytes(&delta, sizeof(delta), deadline);
  int64_t value = 0;
  recv_bytes(&value, sizeof(value), deadline, ("an add to " + key).c_str());
  return value;
}

}  // namespace ccl
