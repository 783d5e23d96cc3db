#include "transport/loopback/loopback_transport.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "base/error.h"
#include "transport/failure_notice.h"

namespace ccl::transport {

// One lock and one condition variable for the whole fabric: it serves tests, not speed.
struct LoopbackFabric::State {
  std::mutex mutex;
  std::condition_variable changed;
  int nranks = 0;
  size_t piece_bytes = 0;
  std::vector<std::deque<std::vector<std::byte>>> queues;  // [src * nranks + dst]
  std::vector<char> failed;                                // per rank
  std::vector<char> interrupted;                           // per rank
  std::vector<char> notified;                              // per rank: notices[rank] is set
  std::vector<FailureNotice> notices;                      // per rank

  std::deque<std::vector<std::byte>>& queue(int src, int dst) {
    return queues[static_cast<size_t>(src) * nranks + dst];
  }
};

LoopbackFabric::LoopbackFabric(int nranks, size_t piece_bytes) : state_(new State) {
  if (nranks < 1 || piece_bytes == 0 || piece_bytes % kPieceAlign != 0) {
    throw_error(cclInternalError, "loopback: bad fabric (%d ranks, pieces of %zu bytes)", nranks,
                piece_bytes);
  }
  state_->nranks = nranks;
  state_->piece_bytes = piece_bytes;
  state_->queues.resize(static_cast<size_t>(nranks) * nranks);
  state_->failed.assign(nranks, 0);
  state_->interrupted.assign(nranks, 0);
  state_->notified.assign(nranks, 0);
  state_->notices.resize(nranks);
}

LoopbackFabric::~LoopbackFabric() = default;

int LoopbackFabric::nranks() const { return state_->nranks; }

void LoopbackFabric::fail_rank(int rank) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->failed.at(rank) = 1;
  }
  state_->changed.notify_all();
}

class LoopbackConnection final : public Connection {
 public:
  LoopbackConnection(LoopbackFabric::State* state, int rank, int peer)
      : Connection(peer), state_(state), rank_(rank) {}

  void post_send(SendRequest* request) override {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->queue(rank_, peer()).emplace_back(request->data, request->data + request->bytes);
    }
    state_->changed.notify_all();
    request->done_bytes = request->bytes;
    request->complete = true;
  }

  void post_recv(RecvRequest* request) override {
    request->done_bytes = 0;
    request->complete = false;
    recvs_.push_back(request);
  }

  bool progress() override {
    bool moved = false;
    while (!recvs_.empty()) {
      std::vector<std::byte> message;
      {
        std::lock_guard<std::mutex> lock(state_->mutex);
        auto& queue = state_->queue(peer(), rank_);
        if (queue.empty()) break;
        message = std::move(queue.front());
        queue.pop_front();
      }
      RecvRequest* request = recvs_.front();
      if (message.size() != request->bytes) {
        throw_error(cclInternalError,
                    "message size mismatch with rank %d: expected %zu bytes, peer sent %zu", peer(),
                    request->bytes, message.size());
      }
      for (size_t offset = 0; offset < message.size(); offset += state_->piece_bytes) {
        size_t length = std::min(state_->piece_bytes, message.size() - offset);
        request->sink->consume(message.data() + offset, offset, length);
        request->done_bytes += length;
      }
      request->complete = true;
      recvs_.pop_front();
      moved = true;
    }
    return moved;
  }

  bool busy() const override { return !recvs_.empty(); }

  // Under the fabric lock.
  bool ready_locked() const {
    return !recvs_.empty() &&
           (!state_->queue(peer(), rank_).empty() || state_->failed[peer()] != 0);
  }
  bool peer_gone_locked() const {
    return !recvs_.empty() && state_->queue(peer(), rank_).empty() && state_->failed[peer()] != 0;
  }

 private:
  LoopbackFabric::State* state_;
  int rank_;
  std::deque<RecvRequest*> recvs_;
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank)
      : fabric_(std::move(fabric)), state_(fabric_->state_.get()), rank_(rank) {
    if (rank < 0 || rank >= state_->nranks) {
      throw_error(cclInternalError, "loopback: rank %d outside a fabric of %d", rank,
                  state_->nranks);
    }
  }

  const char* name() const override { return "loopback"; }

  std::vector<Connection*> connect(const SetupContext&, std::span<const int> peers) override {
    std::vector<Connection*> result;
    for (int p : peers) {
      bool known = std::any_of(connections_.begin(), connections_.end(),
                               [p](const auto& c) { return c->peer() == p; });
      if (p < 0 || p >= state_->nranks || p == rank_ || known) {
        throw_error(cclInternalError, "loopback: rank %d cannot connect to rank %d", rank_, p);
      }
      connections_.push_back(std::make_unique<LoopbackConnection>(state_, rank_, p));
      result.push_back(connections_.back().get());
    }
    return result;
  }

  void wait(std::chrono::microseconds timeout) override {
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->changed.wait_for(lock, timeout, [&] {
      if (state_->interrupted[rank_] || notice_locked() >= 0) return true;
      return std::any_of(connections_.begin(), connections_.end(),
                         [](const auto& c) { return c->ready_locked(); });
    });
    state_->interrupted[rank_] = 0;
    if (std::none_of(connections_.begin(), connections_.end(),
                     [](const auto& c) { return c->ready_locked(); })) {
      throw_notice_locked();
    }
    for (const auto& c : connections_) {
      if (c->peer_gone_locked()) {
        throw_peer_error(cclRemoteError, c->peer(), "rank %d exited", c->peer());
      }
    }
  }

  void notify_failure(const FailureNotice& notice) override {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (state_->notified[rank_]) return;
      state_->notified[rank_] = 1;
      state_->notices[rank_] = notice;
    }
    state_->changed.notify_all();
  }

  void collect_notices(std::vector<std::pair<int, FailureNotice>>& out) override {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const auto& c : connections_) {
      if (state_->notified[c->peer()]) out.emplace_back(c->peer(), state_->notices[c->peer()]);
    }
  }

  void check_health() override {
    std::lock_guard<std::mutex> lock(state_->mutex);
    throw_notice_locked();
  }

  void interrupt() override {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->interrupted[rank_] = 1;
    }
    state_->changed.notify_all();
  }

 private:
  // The first peer that posted a notice, or -1.
  int notice_locked() const {
    for (const auto& c : connections_) {
      if (state_->notified[c->peer()]) return c->peer();
    }
    return -1;
  }
  void throw_notice_locked() const {
    const int from = notice_locked();
    if (from >= 0) throw_notice(state_->notices[from], from);
  }

  std::shared_ptr<LoopbackFabric> fabric_;
  LoopbackFabric::State* state_;
  int rank_;
  std::vector<std::unique_ptr<LoopbackConnection>> connections_;
};

std::unique_ptr<Transport> make_loopback_transport(std::shared_ptr<LoopbackFabric> fabric,
                                                   int rank) {
  if (!fabric) throw_error(cclInternalError, "loopback: no fabric");
  return std::make_unique<LoopbackTransport>(std::move(fabric), rank);
}

}  // namespace ccl::transport
