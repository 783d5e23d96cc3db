#include "transport/shm/shm_connection.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "transport/shm/doorbell.h"

namespace ccl::transport::shm {

ShmConnection::ShmConnection(int peer, int peer_pid, ChannelView outbound, ChannelView inbound,
                             Doorbell* peer_bell)
    : Connection(peer), out_(outbound), in_(inbound), peer_bell_(peer_bell), liveness_(peer_pid) {
  // A fresh channel starts at zero on both sides; reading makes this robust anyway.
  send_head_ = out_.control->head.value.load(std::memory_order_relaxed);
  send_tail_seen_ = out_.control->tail.value.load(std::memory_order_acquire);
  recv_tail_ = in_.control->tail.value.load(std::memory_order_relaxed);
  recv_head_seen_ = in_.control->head.value.load(std::memory_order_acquire);
}

void ShmConnection::post_send(SendRequest* request) {
  if (request->bytes > 0 && request->data == nullptr) {
    throw_error(cclInternalError, "shm: send of %zu bytes to rank %d without a buffer",
                request->bytes, peer());
  }
  request->done_bytes = 0;
  request->complete = false;
  sends_.push_back(request);
}

void ShmConnection::post_recv(RecvRequest* request) {
  if (request->sink == nullptr) {
    throw_error(cclInternalError, "shm: receive from rank %d without a sink", peer());
  }
  request->done_bytes = 0;
  request->complete = false;
  recvs_.push_back(request);
}

bool ShmConnection::progress() {
  // Receive first: freeing inbound slots lets the peer's sends go on while we copy ours.
  bool moved = progress_recvs();
  moved |= progress_sends();
  return moved;
}

bool ShmConnection::ready() const {
  // seq_cst loads: this is S3 of the doorbell protocol (doorbell.h).
  if (!recvs_.empty() && in_.control->head.value.load(std::memory_order_seq_cst) != recv_tail_) {
    return true;
  }
  if (!sends_.empty() &&
      send_head_ - out_.control->tail.value.load(std::memory_order_seq_cst) < out_.slots) {
    return true;
  }
  return false;
}

bool ShmConnection::progress_sends() {
  bool moved = false;
  while (!sends_.empty()) {
    SendRequest* request = sends_.front();
    // do-while: a zero-byte message still takes one (empty) slot.
    do {
      if (send_head_ - send_tail_seen_ == out_.slots) {
        send_tail_seen_ = out_.control->tail.value.load(std::memory_order_acquire);
        if (send_head_ - send_tail_seen_ == out_.slots) return moved;  // ring full
      }
      size_t length = std::min(out_.slot_bytes, request->bytes - request->done_bytes);
      SlotHeader* header = out_.header(send_head_);
      header->message_sequence = send_sequence_;
      header->message_bytes = request->bytes;
      header->offset = request->done_bytes;
      header->length = length;
      header->point_to_point = request->point_to_point ? 1 : 0;
      if (length > 0) memcpy(out_.data(send_head_), request->data + request->done_bytes, length);
      request->done_bytes += length;
      ++send_head_;
      // seq_cst, not just release: the store is W1 of the doorbell protocol (doorbell.h).
      out_.control->head.value.store(send_head_, std::memory_order_seq_cst);
      doorbell_ring(peer_bell_);  // the peer may sleep waiting for this slot
      moved = true;
    } while (request->done_bytes < request->bytes);
    // Every byte is in the ring: the caller may reuse its buffer.
    request->complete = true;
    sends_.pop_front();
    ++send_sequence_;
  }
  return moved;
}

bool ShmConnection::progress_recvs() {
  bool moved = false;
  while (!recvs_.empty()) {
    if (recv_tail_ == recv_head_seen_) {
      recv_head_seen_ = in_.control->head.value.load(std::memory_order_acquire);
      if (recv_tail_ == recv_head_seen_) return moved;  // nothing new
    }
    RecvRequest* request = recvs_.front();
    // The header is read once: a misbehaving peer cannot change what we checked.
    SlotHeader header = *in_.header(recv_tail_);
    if (header.message_sequence != recv_sequence_ || header.offset != request->done_bytes ||
        header.length > in_.slot_bytes || header.offset + header.length > header.message_bytes) {
      throw_error(cclInternalError,
                  "shm: corrupted channel from rank %d (message %llu offset %llu length %llu, "
                  "expected message %llu offset %zu)",
                  peer(), static_cast<unsigned long long>(header.message_sequence),
                  static_cast<unsigned long long>(header.offset),
                  static_cast<unsigned long long>(header.length),
                  static_cast<unsigned long long>(recv_sequence_), request->done_bytes);
    }
    if (header.message_bytes != request->bytes) {
      throw_error(cclInternalError,
                  "message size mismatch with rank %d: expected %zu bytes, peer sent %llu", peer(),
                  request->bytes, static_cast<unsigned long long>(header.message_bytes));
    }
    // Straight from shared memory into the sink: no staging copy. Slots are S-aligned pieces
    // (S is a multiple of kPieceAlign), so the piece rule holds.
    if (header.length > 0) {
      request->sink->consume(in_.data(recv_tail_), header.offset, header.length);
    }
    request->done_bytes += header.length;
    ++recv_tail_;
    in_.control->tail.value.store(recv_tail_, std::memory_order_seq_cst);  // W1, doorbell.h
    doorbell_ring(peer_bell_);  // the peer may sleep waiting for a free slot
    moved = true;
    if (request->done_bytes == request->bytes) {
      request->complete = true;
      recvs_.pop_front();
      ++recv_sequence_;
    }
  }
  return moved;
}

}  // namespace ccl::transport::shm
