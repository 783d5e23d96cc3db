// UcxConnection's receive path: chunk receives into the direct destination or staging buffers,
// the sink fed in order and in kPieceAlign pieces, and the receiver's half of the RMA handshake
// (ucx_connection.h).
#include <string>

#include "transport/posted_request.h"
#include "transport/registered_region.h"
#include "transport/ucx/ucx_chunking.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_memory.h"

namespace ccl::transport::ucx {
namespace {

// Where a zero-byte chunk is received.
std::byte g_no_data[1];

bool offerable(const RecvRequest& request, const std::byte* direct) {
  return direct != nullptr && request.bytes >= kRmaMinBytes && request.region != nullptr &&
         request.region->key_of(kKeyName) != nullptr &&
         request.region->covers(direct, request.bytes);
}

}  // namespace

void UcxConnection::post_recv(RecvRequest* request) {
  start_recv("ucx", request, peer());
  std::byte* direct = request->bytes > 0 && request->sink != nullptr
                          ? request->sink->direct_destination()
                          : nullptr;
  const size_t chunk_bytes = chunk_bytes_for(request->bytes);
  IncomingMessage& m = recvs_.emplace_back();
  m.request = request;
  m.sequence = recv_sequence_++;
  m.chunk_bytes = chunk_bytes;
  m.chunks = chunk_count(request->bytes, chunk_bytes);
  m.direct = direct;
  // Where this endpoint takes no RMA, neither does the peer's (the same lanes, the same rule): a
  // kReadyToSend that comes anyway is answered kGo.
  m.rma_candidate = rma_ && offerable(*request, direct);
  // Until the sender says how it sends (a kReadyToSend, or chunk 0 with data), only chunk 0 is
  // posted: an offer makes chunk 0 the only one.
  m.hold = m.rma_candidate;
  if (failed_) return;
  try {
    auto ready = ready_to_send_.find(m.sequence);
    if (ready != ready_to_send_.end()) {
      const uint64_t sender_bytes = ready->second.bytes;
      ready_to_send_.erase(ready);
      answer_ready_to_send(m, sender_bytes);
    }
    post_chunk_recvs();
  } catch (const Error& e) {
    if (failed_) throw;
    fail(e);
  }
}

UcxConnection::IncomingMessage* UcxConnection::find_recv(uint64_t sequence) {
  for (IncomingMessage& m : recvs_) {
    if (m.sequence == sequence) return &m;
  }
  return nullptr;
}

void UcxConnection::answer_ready_to_send(IncomingMessage& m, uint64_t sender_bytes) {
  if (sender_bytes != m.request->bytes) {
    fail(Error(cclInternalError,
               "message size mismatch with rank " + std::to_string(peer()) + ": expected " +
                   std::to_string(m.request->bytes) + " bytes, peer sends " +
                   std::to_string(sender_bytes),
               peer()));
  }
  // The sender waits and has sent nothing: chunk 0 is posted at most, and still pending.
  if (m.rma_candidate && m.hold) {
    m.offered = true;
    ++stats_.offers_sent;
    send_control(ControlWire::kOffer, m.sequence, m.request->bytes, m.request->region, m.direct);
  } else {
    m.hold = false;
    ++stats_.go_sent;
    send_control(ControlWire::kGo, m.sequence, m.request->bytes);
  }
}

int UcxConnection::take_staging_slot(size_t bytes) {
  for (size_t i = 0; i < staging_.size(); ++i) {
    StagingSlot& slot = staging_[i];
    if (slot.busy) continue;
    if (slot.size < bytes) {
      // Left uninitialized (UCX writes it). new[] aligns for any scalar, which is all a sink
      // needs: kPieceAlign is about offsets within the message, not addresses.
      slot.data.reset(new std::byte[bytes]);
      slot.size = bytes;
    }
    slot.busy = true;
    return static_cast<int>(i);
  }
  return -1;
}

bool UcxConnection::post_chunk_recv(IncomingMessage& m) {
  const uint32_t index = m.next_chunk;
  const size_t expected = chunk_length(m.request->bytes, m.chunk_bytes, index);
  std::byte* buffer = g_no_data;
  int slot = -1;
  if (expected > 0 && m.direct != nullptr) {
    if (direct_in_flight_ >= kDirectWindow) return false;
    buffer = m.direct + static_cast<size_t>(index) * m.chunk_bytes;
    ++direct_in_flight_;
  } else if (expected > 0) {
    slot = take_staging_slot(m.chunk_bytes);
    if (slot < 0) return false;
    buffer = staging_[slot].data.get();
  }
  ++m.next_chunk;
  ChunkRecv& chunk = m.in_flight.emplace_back();
  chunk.index = index;
  chunk.expected = expected;
  chunk.buffer = buffer;
  chunk.staging_slot = slot;
  ucp_request_param_t param = polled_recv_param();
  chunk.op.reset(ucp_tag_recv_nbx(worker_.worker(), buffer, expected,
                                  make_tag(Channel::kPayload, peer(), m.sequence, index),
                                  kPayloadRecvMask, &param));
  return true;
}

bool UcxConnection::post_chunk_recvs() {
  bool moved = false;
  // In message order: a later message's chunks never take a window slot or staging buffer that
  // an earlier one is waiting for.
  for (IncomingMessage& m : recvs_) {
    while (m.next_chunk < m.chunks && !(m.hold && m.next_chunk > 0)) {
      if (!post_chunk_recv(m)) return moved;
      moved = true;
    }
    if (m.next_chunk < m.chunks) return moved;
  }
  return moved;
}

void UcxConnection::fail_mismatch(const IncomingMessage& m, const std::string& what) {
  fail(Error(cclInternalError,
             "message size mismatch with rank " + std::to_string(peer()) + ": expected " +
                 std::to_string(m.request->bytes) + " bytes, peer " + what,
             peer()));
}

void UcxConnection::check_chunk(IncomingMessage& m, ChunkRecv& chunk) {
  const ucs_status_t status = chunk.op.status();
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    fail_mismatch(m, "sent more (chunk " + std::to_string(chunk.index) + " is over " +
                         std::to_string(chunk.expected) + " bytes)");
  }
  if (status != UCS_OK) fail_status("receive", status);
  const ucp_tag_recv_info_t& info = chunk.op.received();
  const bool last = (info.sender_tag & kLastFlag) != 0;
  if ((info.sender_tag & kRmaDoneFlag) != 0) {
    if (!m.offered || chunk.index != 0 || info.length != 0) {
      fail(Error(cclInternalError,
                 "ucx: rank " + std::to_string(peer()) + " says it put message " +
                     std::to_string(m.sequence) + " by RMA, which this rank did not offer",
                 peer()));
    }
    return;
  }
  const bool expected_last = chunk.index + 1 == m.chunks;
  if (last && (!expected_last || info.length != chunk.expected)) {
    const size_t peer_bytes = static_cast<size_t>(chunk.index) * m.chunk_bytes + info.length;
    fail_mismatch(m, "sent " + std::to_string(peer_bytes));
  }
  if (!last && expected_last) fail_mismatch(m, "sent more");
  if (info.length != chunk.expected) {
    fail_mismatch(m, "sent a chunk of " + std::to_string(info.length) + " bytes where " +
                         std::to_string(chunk.expected) + " were due");
  }
}

bool UcxConnection::complete_chunks(IncomingMessage& m) {
  bool moved = false;
  for (ChunkRecv& chunk : m.in_flight) {
    if (chunk.done || !chunk.op.done_recv()) continue;
    check_chunk(m, chunk);
    chunk.done = true;
    moved = true;
    if ((chunk.op.received().sender_tag & kRmaDoneFlag) != 0) {
      m.request->done_bytes = m.request->bytes;
      m.chunks_done = m.chunks;
      m.next_chunk = m.chunks;
    } else if (chunk.index == 0) {
      m.hold = false;  // the sender went by tagged chunks
    }
  }
  // Staged chunks reach the sink in order; direct ones are done wherever they are.
  for (auto it = m.in_flight.begin(); it != m.in_flight.end();) {
    if (!it->done) {
      if (it->staging_slot >= 0) break;
      ++it;
      continue;
    }
    const size_t length = it->op.received().length;
    if (it->staging_slot >= 0) {
      m.request->sink->consume(it->buffer, static_cast<size_t>(it->index) * m.chunk_bytes, length);
      staging_[it->staging_slot].busy = false;
      ++stats_.staged_chunks;
    } else if (it->buffer != g_no_data) {
      --direct_in_flight_;
    }
    if ((it->op.received().sender_tag & kRmaDoneFlag) == 0) {
      m.request->done_bytes += length;
      ++m.chunks_done;
    }
    it = m.in_flight.erase(it);
  }
  return moved;
}

bool UcxConnection::advance_recvs() {
  bool moved = false;
  for (auto it = recvs_.begin(); it != recvs_.end();) {
    moved |= complete_chunks(*it);
    if (it->chunks_done == it->chunks && it->in_flight.empty()) {
      it->request->complete = true;
      it = recvs_.erase(it);
    } else {
      ++it;
    }
  }
  moved |= post_chunk_recvs();
  return moved;
}

void UcxConnection::cancel_chunk_receives() {
  for (IncomingMessage& m : recvs_) {
    for (ChunkRecv& chunk : m.in_flight) chunk.op.cancel(worker_.worker());
  }
}

}  // namespace ccl::transport::ucx
