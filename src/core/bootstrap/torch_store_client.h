// A client of torch.distributed's TCPStore, for cclCommInitFromEnv under torchrun. torchrun's
// agent serves a TCPStore on MASTER_ADDR:MASTER_PORT for its workers (they see
// TORCHELASTIC_USE_AGENT_STORE=True), so rank 0 cannot listen there; instead rank 0 serves ccl's
// own rendezvous on a port of its choosing, as cclGetUniqueId does, and publishes that unique id
// in torchrun's store, where the other ranks read it.
//
// The wire format is torch 2.x's (the same from 2.0 to 2.15, in both of its servers, the classic
// one and libuv's; torch/csrc/distributed/c10d/store/TCPStoreBackend.hpp names the values): a
// connection opens with VALIDATE and a uint32 magic number; then a request is a one-byte query
// type and its arguments; a string or a byte vector goes as a host-order uint64 length and the
// bytes.
//   VALIDATE (0): uint32 0x3C85F7CE  no answer (a server that disagrees closes the connection)
//   SET      (1): key, value         no answer
//   GET      (3): key                value (the key must exist: WAIT first)
//   ADD      (4): key, int64 delta   the new int64 value
//   WAIT     (6): uint64 n, n keys   one byte, 0 (stop waiting), once every key exists
// torch 1.x numbered the queries otherwise and did not validate: a server that closes the
// connection on our first request gets an error that says so and names CCL_COMM_ID, with which
// the ranks rendezvous on ccl's own store instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "core/bootstrap/socket.h"

namespace ccl {

class TorchStoreClient {
 public:
  // Connects, retrying until `deadline` (the agent's store is up before workers start, but a
  // restarted agent may not be yet).
  static TorchStoreClient connect(const SocketAddress& address, Deadline deadline);

  void set(const std::string& key, const std::vector<uint8_t>& value, Deadline deadline);
  // Waits until `key` exists (Timeout at `deadline`), then reads it.
  std::vector<uint8_t> get(const std::string& key, Deadline deadline);
  int64_t add(const std::string& key, int64_t delta, Deadline deadline);

  // The query types (torch 2.x's QueryType) and the validation's magic number, for tests.
  enum Query : uint8_t { kValidate = 0, kSet = 1, kGet = 3, kAdd = 4, kWait = 6 };
  static constexpr uint32_t kValidationMagic = 0x3C85F7CE;
  static constexpr uint8_t kStopWaiting = 0;

 private:
  TorchStoreClient(Socket socket, std::string where)
      : socket_(std::move(socket)), where_(std::move(where)) {}
  void send_bytes(const void* data, size_t bytes, Deadline deadline);
  void send_sized(const void* data, size_t bytes, Deadline deadline);  // uint64 length, bytes
  void recv_bytes(void* data, size_t bytes, Deadline deadline, const char* what);
  // Runs a send or receive; a closed connection or a timeout becomes an error that says what
  // was under way and names torch's protocol and CCL_COMM_ID.
  template <class Io>
  void io_explained(Io io, const char* what);

  Socket socket_;
  std::string where_;  // "host:port", for messages
};

}  // namespace ccl
