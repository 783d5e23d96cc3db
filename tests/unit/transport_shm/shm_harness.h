// Runs a rank body on N connected shm ranks, as threads of this process or as forked processes,
// and checks that /dev/shm holds nothing of the communicator after connect and after teardown.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/bootstrap/store.h"
#include "transport/shm/shm_transport.h"
#include "transport_test_util.h"

namespace ccl::test {

struct RankEnv {
  int rank = 0;
  int nranks = 1;
  std::string tag;
  Store* store = nullptr;
  transport::Transport* transport = nullptr;
  std::vector<transport::Connection*> by_peer;  // indexed by rank; nullptr for ourselves
  Deadline deadline = Deadline::never();
};
using RankBody = std::function<void(RankEnv&)>;

struct HarnessOptions {
  std::optional<transport::ShmOptions> shm;  // nullopt: from the config registry
  std::chrono::milliseconds timeout{20000};
};

// A connected rank: the transport and its connections to every other rank.
struct ConnectedRank {
  std::unique_ptr<transport::Transport> transport;
  std::vector<transport::Connection*> by_peer;
};
ConnectedRank connect_rank(Store& store, const std::string& tag, int rank, int nranks,
                           const HarnessOptions& options, Deadline deadline);

// One error string per rank (empty: passed), plus "dev/shm" entries when files were left.
std::vector<std::string> run_shm_threads(int nranks, const HarnessOptions& options,
                                         const RankBody& body);
// Rank 0 runs here, ranks 1.. in forked children (reported through their exit status).
std::vector<std::string> run_shm_processes(int nranks, const HarnessOptions& options,
                                           const RankBody& body);

// Waits for `pid` at most `timeout` (then kills it); returns its wait status, or -1.
int wait_child(int pid, std::chrono::milliseconds timeout);

// The message sizes of the matrix for slot size S.
std::vector<size_t> matrix_sizes(size_t slot_bytes);

}  // namespace ccl::test
