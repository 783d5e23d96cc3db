// UcxConnection's send path: tagged chunks within kSendWindow, or the RMA handshake for a
// registered buffer (ucx_connection.h).
#include <string>

#include "transport/posted_request.h"
#include "transport/registered_region.h"
#include "transport/ucx/ucx_chunking.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_memory.h"

namespace ccl::transport::ucx {
namespace {

// What a zero-byte message points UCX at.
const std::byte kNoData{};

bool registered_for_ucx(const SendRequest& request) {
  return request.region != nullptr && request.region->key_of(kKeyName) != nullptr &&
         request.region->covers(request.data, request.bytes);
}

}  // namespace

void UcxConnection::post_send(SendRequest* request) {
  start_send("ucx", request, peer());
  const size_t chunk_bytes = chunk_bytes_for(request->bytes);
  OutgoingMessage& m = sends_.emplace_back();
  m.request = request;
  m.sequence = send_sequence_++;
  m.chunk_bytes = chunk_bytes;
  m.chunks = chunk_count(request->bytes, chunk_bytes);
  if (failed_) return;  // progress() throws
  try {
    if (rma_ && request->bytes >= kRmaMinBytes && registered_for_ucx(*request)) {
      m.stage = OutgoingMessage::Stage::kAwaitingReply;
      send_control(ControlWire::kReadyToSend, m.sequence, request->bytes, nullptr, nullptr,
                   request->point_to_point);
    } else {
      ++stats_.tagged_messages;
      post_chunk_sends();
    }
  } catch (const Error& e) {
    if (failed_) throw;
    fail(e);
  }
}

UcxConnection::OutgoingMessage* UcxConnection::find_send(uint64_t sequence) {
  for (OutgoingMessage& m : sends_) {
    if (m.sequence == sequence) return &m;
  }
  return nullptr;
}

bool UcxConnection::post_chunk_sends() {
  bool moved = false;
  // In message order, as the receiver posts its chunk receives: a later message's chunks must not
  // fill the window while an earlier one waits for its RMA reply (the receiver would not post
  // their receives before the earlier message is done, and the earlier one could not be sent).
  // Messages going by RMA send no chunks and are skipped.
  for (OutgoingMessage& m : sends_) {
    if (m.stage == OutgoingMessage::Stage::kAwaitingReply) break;
    if (m.stage != OutgoingMessage::Stage::kTagged) continue;
    while (m.next_chunk < m.chunks && sends_in_flight_ < kSendWindow) {
      const uint32_t index = m.next_chunk++;
      const size_t bytes = chunk_length(m.request->bytes, m.chunk_bytes, index);
      const std::byte* data =
          bytes == 0 ? &kNoData : m.request->data + static_cast<size_t>(index) * m.chunk_bytes;
      ucp_tag_t tag = make_tag(Channel::kPayload, self_, m.sequence, index);
      if (index + 1 == m.chunks) tag |= kLastFlag;
      if (m.request->point_to_point) tag |= kPointToPointFlag;
      ChunkSend& chunk = m.in_flight.emplace_back();
      chunk.index = index;
      chunk.bytes = bytes;
      chunk.op.reset(send_tagged(data, bytes, tag));
      ++sends_in_flight_;
      moved = true;
    }
    if (sends_in_flight_ >= kSendWindow) break;
  }
  return moved;
}

ucs_status_ptr_t UcxConnection::send_tagged(const void* data, size_t bytes, ucp_tag_t tag) {
  ucp_request_param_t param = polled_param();
  worker_.note_sent();
  return ucp_tag_send_nbx(ep_, data, bytes, tag, &param);
}

void UcxConnection::start_rma(OutgoingMessage& m, const ControlWire& offer) {
  const ucp_rkey_h rkey =
      rkeys_.get(ep_, peer(), offer.region_id, {offer.packed, offer.packed_bytes});
  // Held until the put's flush completes (the cache may not evict it before).
  m.rkey_region = offer.region_id;
  m.holds_rkey = true;
  ucp_request_param_t param = polled_param();
  worker_.note_sent();
  m.put.reset(ucp_put_nbx(ep_, m.request->data, m.request->bytes, offer.address, rkey, &param));
  if (m.put.done() && m.put.status() != UCS_OK) fail_status("RMA put", m.put.status());
  // The flush completes once every earlier operation on the endpoint, the put included, is
  // complete at the peer.
  ucp_request_param_t flush_param = polled_param();
  m.flush.reset(ucp_ep_flush_nbx(ep_, &flush_param));
  m.stage = OutgoingMessage::Stage::kRmaPut;
  ++stats_.rma_messages;
}

bool UcxConnection::advance_message(OutgoingMessage& m) {
  bool moved = false;
  switch (m.stage) {
    case OutgoingMessage::Stage::kAwaitingReply:
      return false;
    case OutgoingMessage::Stage::kTagged:
      while (!m.in_flight.empty() && m.in_flight.front().op.done()) {
        ChunkSend& c = m.in_flight.front();
        if (c.op.status() != UCS_OK) fail_status("send", c.op.status());
        m.request->done_bytes += c.bytes;
        ++m.chunks_done;
        --sends_in_flight_;
        m.in_flight.pop_front();
        moved = true;
      }
      // Later chunks may be done before the front one: they are counted once it is.
      return moved;
    case OutgoingMessage::Stage::kRmaPut: {
      if (!m.put.done() || !m.flush.done()) return false;
      if (m.put.status() != UCS_OK) fail_status("RMA put", m.put.status());
      if (m.flush.status() != UCS_OK) fail_status("RMA flush", m.flush.status());
      m.put.release();
      m.flush.release();
      rkeys_.release(m.rkey_region);
      m.holds_rkey = false;
      const ucp_tag_t tag =
          make_tag(Channel::kPayload, self_, m.sequence, 0) | kLastFlag | kRmaDoneFlag;
      m.done_send.reset(send_tagged(&kNoData, 0, tag));
      m.request->done_bytes = m.request->bytes;  // the buffer is free once the flush is done
      m.stage = OutgoingMessage::Stage::kRmaDone;
      moved = true;
      [[fallthrough]];
    }
    case OutgoingMessage::Stage::kRmaDone:
      if (!m.done_send.done()) return moved;
      if (m.done_send.status() != UCS_OK) fail_status("send", m.done_send.status());
      m.done_send.release();
      m.chunks_done = m.chunks;
      return true;
  }
  return moved;
}

bool UcxConnection::advance_sends() {
  bool moved = post_chunk_sends();
  for (auto it = sends_.begin(); it != sends_.end();) {
    moved |= advance_message(*it);
    if (it->chunks_done == it->chunks) {
      it->request->complete = true;
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
  if (moved) post_chunk_sends();
  return moved;
}

}  // namespace ccl::transport::ucx
