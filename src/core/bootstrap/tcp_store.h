// The store between processes: a StoreServer thread (in the process that made the unique id, or
// in rank 0 for launcher-started jobs) and one TcpStore client per rank.
//
// Wire protocol (all integers little-endian, every length bounded and checked):
//   client hello: magic u32 'CCLS' (the bytes C,C,L,S), version u32 (1), secret[16], rank i32,
//            nranks i32; no reply (a refused hello just closes the connection)
//   request: op u8 (SET 1, GET 2, ADD 3, WAIT 4), key_len u32 (<= 4 KiB), key, [value_len u32
//            (<= 16 MiB), value] for SET, [delta i64] for ADD, [count u32 (<= 65536), then count
//            times key_len u32 + key] for WAIT, whose first key_len is 0; a whole request is at
//            most 16 MiB + 64 KiB
//   reply:   status u8 (0 ok), then value_len u32 + value (GET), i64 (ADD), nothing (SET, WAIT)
// ADD keeps its counter as an 8-byte value (a GET of the key returns those 8 bytes).
// A connection that presents a wrong secret or a malformed message is closed; the others go on.
// GET and WAIT are answered when their keys exist; the client's deadline bounds them.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "core/bootstrap/socket.h"
#include "core/bootstrap/store.h"
#include "core/bootstrap/unique_id.h"

namespace ccl {

class StoreServer {
 public:
  // Listens on `address` (port 0: any free port), or serves on `listen_fd` if >= 0 (a socket a
  // launcher bound for us). The server stops by itself once `expected clients` (the nranks that
  // clients announce) have connected and all have disconnected, or when `idle_timeout` passes
  // with no connected client.
  static std::unique_ptr<StoreServer> start(const SocketAddress& address, const Secret& secret,
                                            std::chrono::milliseconds idle_timeout,
                                            int listen_fd = -1);
  ~StoreServer();  // stops and joins
  SocketAddress address() const;
  bool finished() const;
  void stop();
  // Waits until the server has stopped by itself, at most until the deadline.
  void wait_finished(Deadline deadline);

 private:
  StoreServer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Keeps servers started by cclGetUniqueId alive until they finish; joins them at exit.
void adopt_store_server(std::unique_ptr<StoreServer> server);
// A rendezvous on the bootstrap interface (choose_interface()), adopted as above: the unique id
// that names it (cclGetUniqueId, and the leader of a split, shrink or grow).
cclUniqueId start_adopted_rendezvous(std::chrono::milliseconds idle_timeout);

class TcpStore : public Store {
 public:
  static std::unique_ptr<TcpStore> connect(const SocketAddress& server, const Secret& secret,
                                           int rank, int nranks, Deadline deadline,
                                           const AbortFlag* abort);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;

 private:
  TcpStore(Socket socket, const AbortFlag* abort) : socket_(std::move(socket)), abort_(abort) {}
  std::mutex mutex_;
  Socket socket_;
  const AbortFlag* abort_;
};

}  // namespace ccl
