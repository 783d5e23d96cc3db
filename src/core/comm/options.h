// What a communicator is asked to be: its rank among how many, its timeout, name and mode, and for
// tests the loopback fabric its ranks share. Every part of the communicator reads it (a reference
// to the communicator's own copy); nothing changes it after construction.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace ccl {

namespace transport {
class LoopbackFabric;
}
namespace tune {
struct Figures;
}

struct CommOptions {
  int rank = 0;
  int nranks = 1;
  std::chrono::milliseconds timeout{300000};
  std::string name;  // cclConfig_t.commName, for logs
  // cclConfig_t.blocking = 0: init and NULL-stream operations return cclInProgress and run in
  // the background; cclCommGetAsyncError says when they are done.
  bool blocking = true;
  // Set by the communicator: a CUDA context was current on the thread that made it (the device
  // it is bound to). The ranks tell each other at the rendezvous (Peers::cuda_contexts).
  bool cuda_context = false;
  // Loopback (ranks as threads of one process, for tests): when set, every peer uses it.
  std::shared_ptr<transport::LoopbackFabric> loopback;
  // A shrunk or grown communicator's link figures: its parent's (the same links; every member
  // has the same ones), so that it starts without probing them again. Null: probe or recall.
  std::shared_ptr<const tune::Figures> figures;
};

}  // namespace ccl
