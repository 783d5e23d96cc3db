// One shm connection: two single-producer single-consumer rings, one per direction.
//   outbound: the channel for us inside the peer's segment; we produce, the peer consumes
//   inbound:  the channel for the peer inside our segment; the peer produces, we consume
// Each message starts at a fresh slot and takes max(1, ceil(bytes / S)) slots; every slot says
// which message it belongs to and that message's size, so the receiver can check that both
// sides agree on the size (they ran the same collective).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

#include "transport/shm/peer_liveness.h"
#include "transport/shm/shm_layout.h"
#include "transport/transport.h"

namespace ccl::transport::shm {

class ShmConnection final : public Connection {
 public:
  // `peer_bell` is the doorbell of the peer's segment: rung when we publish data for it or free
  // space it may be waiting for.
  ShmConnection(int peer, int peer_pid, ChannelView outbound, ChannelView inbound,
                Doorbell* peer_bell);

  void post_send(SendRequest* request) override;
  void post_recv(RecvRequest* request) override;
  bool progress() override;
  bool busy() const override { return !sends_.empty() || !recvs_.empty(); }
  bool can_probe() const override { return true; }
  // A slot the peer published that no posted receive took (reads the shared head only).
  bool incoming() override {
    return recvs_.empty() &&
           in_.control->head.value.load(std::memory_order_acquire) != recv_tail_ &&
           in_.header(recv_tail_)->point_to_point != 0;
  }

  // Whether progress() would move something now (reads the shared counters only). Used by
  // Transport::wait() to re-check before it sleeps.
  bool ready() const;
  const PeerLiveness& liveness() const { return liveness_; }

 private:
  bool progress_sends();
  bool progress_recvs();

  ChannelView out_;
  ChannelView in_;
  Doorbell* peer_bell_;
  PeerLiveness liveness_;

  std::deque<SendRequest*> sends_;
  std::deque<RecvRequest*> recvs_;

  // Producer side (outbound): our head, the last tail we read, the current message's number.
  uint64_t send_head_ = 0;
  uint64_t send_tail_seen_ = 0;
  uint64_t send_sequence_ = 0;
  // Consumer side (inbound): our tail, the last head we read, the message we expect next.
  uint64_t recv_tail_ = 0;
  uint64_t recv_head_seen_ = 0;
  uint64_t recv_sequence_ = 0;
};

}  // namespace ccl::transport::shm
