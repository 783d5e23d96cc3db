// The peers of a communicator: where every rank sits (the layout built from the places exchanged
// at the rendezvous), one transport per medium (shm, loopback, or the network transport each pair
// chose: ib, ucx, tcp) and the connection each peer is reached by, the wait policy, and the
// executor and direct collectives that drive them. It tells the peers of a failure (once per
// communicator) and asks the transports whether a peer failed. It keeps the registrations made with
// its transports (registration_cache.h) and resolves each call's buffers against them
// (call_memory.h). It needs the options and the abort flag every wait watches, no other part.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/direct.h"
#include "algorithms/executor.h"
#include "base/deadline.h"
#include "core/bootstrap/socket.h"
#include "core/bootstrap/store.h"
#include "core/bootstrap/unique_id.h"
#include "core/call/call_memory.h"
#include "core/comm/options.h"
#include "core/comm/comm_layout.h"
#include "core/registration/registration_cache.h"
#include "transport/failure_notice.h"
#include "transport/transport.h"

namespace ccl {

class Peers {
 public:
  Peers(const CommOptions& options, const AbortFlag* abort);

  // Joins the other ranks through `store`, connects to every peer, chooses the wait policy and
  // builds the executor (and the direct collectives when the transports share a window).
  // `ready_here` runs once this rank is connected, before the ranks' last barrier: what it sets
  // up is in place on every rank when any rank's connect() returns.
  void connect(Store& store, const std::function<void()>& ready_here = {});

  const CommLayout& layout() const { return layout_; }
  // 12 hex digits rank 0 draws at connect() and every member shares ("" before): they name the
  // shared-memory segments and the trace files of later communicators (trace/trace_path.h).
  const std::string& comm_tag() const { return comm_tag_; }
  // The recovery plane's key of this communicator, drawn by rank 0 with the tag.
  const Secret& recovery_key() const { return recovery_key_; }
  bool local_shm() const { return local_shm_; }
  // Which ranks had a CUDA context current where they made the communicator (CommOptions).
  const std::vector<bool>& cuda_contexts() const { return cuda_contexts_; }
  // Where each rank's process listens for the recovery plane (core/recovery/; port 0: nowhere).
  const std::vector<SocketAddress>& recovery_listeners() const { return recovery_listeners_; }
  algo::Executor& executor() { return *executor_; }
  algo::DirectCollectives* direct() const {
    return direct_.get();
  }  // when every rank shares memory

  // cclCommRegister / cclCommDeregister, and every call's buffers. InvalidUsage before connect().
  RegistrationCache& registrations();
  // The call's buffers (call_memory.h), resolved once per call, before anything is sent.
  CallMemory resolve_memory(const char* what, const void* input, const void* output);

  // The name of the transport that reaches `peer` ("self" for this rank, "none" where no
  // connection was made). InvalidUsage before connect().
  const char* transport_name(int peer) const;

  // Wakes every wait of the transports (abort).
  void interrupt();
  // Tells every peer of a failure (transport.h, failure propagation): once per communicator, later
  // notices are dropped. The caller holds op_mutex_ (or is the init).
  void notify(const transport::FailureNotice& notice);
  // Throws the first transport's report of a failed or vanished peer.
  void check_health();
  // The notices the peers sent since the last call, as (sender, notice).
  void collect_notices(std::vector<std::pair<int, transport::FailureNotice>>& notices);

 private:
  void connect_peers(Store& store, const std::function<void()>& ready_here);
  // connect_peers' work; `ctx` keeps what it learnt for the cleanup of a failed setup.
  void join(Store& store, const std::function<void()>& ready_here, transport::SetupContext& ctx);
  // Each network peer's transport (transport_choice.h), indexed as network_transports().
  std::vector<std::vector<int>> choose_networks(Store& store, const transport::SetupContext& ctx,
                                                const std::vector<int>& net_peers,
                                                Deadline deadline);
  void choose_wait_policy();  // from CCL_SPIN_US/CCL_YIELD_US and whether ranks outnumber cores

  const CommOptions& options_;
  const AbortFlag* abort_;
  int local_ranks_ = 1;     // ranks on this host, this one included
  bool local_shm_ = false;  // the ranks of a host talk over shared memory (or loopback)
  CommLayout layout_;
  std::string comm_tag_;
  Secret recovery_key_{};
  std::vector<bool> cuda_contexts_;
  std::vector<SocketAddress> recovery_listeners_;
  algo::WaitPolicy wait_policy_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  algo::PeerLinks links_;
  std::unique_ptr<algo::Executor> executor_;
  std::unique_ptr<algo::DirectCollectives> direct_;    // when every rank shares memory
  std::vector<transport::Transport*> transport_list_;  // transports_, for the per-call checks
  // After transports_: destroyed before them, it deregisters its regions from them.
  std::unique_ptr<RegistrationCache> registrations_;
  bool notified_ = false;  // under op_mutex_
};

}  // namespace ccl
