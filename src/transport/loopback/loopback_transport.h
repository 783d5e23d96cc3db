// The in-process transport: ranks are threads of one process sharing a LoopbackFabric (unit
// tests of the executor and the collectives run on it without processes or /dev/shm).
// A send copies the message into the fabric and completes at once; a receive hands the message
// to its sink in pieces of `piece_bytes` (a multiple of kPieceAlign), so multi-piece sinks are
// exercised. Messages between a pair of ranks, in one direction, are delivered in order.
#pragma once

#include <cstddef>
#include <memory>

#include "transport/transport.h"

namespace ccl::transport {

class LoopbackFabric {
 public:
  explicit LoopbackFabric(int nranks, size_t piece_bytes = 64 * 1024);
  ~LoopbackFabric();
  LoopbackFabric(const LoopbackFabric&) = delete;
  LoopbackFabric& operator=(const LoopbackFabric&) = delete;

  int nranks() const;
  // Simulates the death of `rank` (fault tests): once the messages it already sent are drained,
  // its peers' pending receives from it fail in wait() with RemoteError.
  void fail_rank(int rank);

 private:
  friend class LoopbackTransport;
  friend class LoopbackConnection;
  struct State;
  std::unique_ptr<State> state_;
};

std::unique_ptr<Transport> make_loopback_transport(std::shared_ptr<LoopbackFabric> fabric,
                                                   int rank);

}  // namespace ccl::transport
