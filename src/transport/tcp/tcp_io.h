// What the tcp connection (tcp_connection.h) and a multi-socket pair's lanes (tcp_lane.h) share
// in moving bytes through a non-blocking socket: the gather limits of one sendmsg, which errors
// mean "try again later", the aligned staging buffer a receive goes through, and the notice
// a NoticeFrame carries.
#pragma once

#include <errno.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "base/error.h"
#include "transport/failure_notice.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace ccl::transport::tcp {

// Enough to gather many small queued messages in one sendmsg; well under IOV_MAX.
inline constexpr int kMaxSendIov = 64;
// Gathering beyond this gains nothing: the kernel takes a few MiB per call at most.
inline constexpr size_t kMaxGatherBytes = 8 * 1024 * 1024;

inline bool is_transient(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};
using StagingBuffer = std::unique_ptr<std::byte, AlignedFree>;

// A receive staging buffer of `bytes`, aligned to kPieceAlign; throws cclSystemError if none.
inline StagingBuffer allocate_staging(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kPieceAlign, bytes) != 0) {
    throw_error(cclSystemError, "tcp: cannot allocate a %zu-byte receive buffer", bytes);
  }
  return StagingBuffer(static_cast<std::byte*>(p));
}

// The failure notice a NoticeFrame carries.
inline FailureNotice notice_of(const NoticeFrame& frame) {
  FailureNotice notice;
  notice.code = frame.code;
  notice.kind = frame.kind;
  notice.origin = frame.origin;
  notice.culprit = frame.culprit;
  return notice;
}

// The NoticeFrame that carries `notice` (the reverse of notice_of).
inline NoticeFrame frame_of(const FailureNotice& notice) {
  return NoticeFrame{kNoticeMagic, static_cast<int16_t>(notice.code),
                     static_cast<int16_t>(notice.kind), notice.origin, notice.culprit};
}

// What a peek at the next bytes of a socket with nothing posted says (idle_peer_gone): the
// peer is gone (closed without a word, or reset), nothing is known (data of a later message, a
// goodbye, or an abort when `abort_fails` is false), or `frame` is a notice to throw.
enum class IdlePeek { kGone, kNothing, kNotice };
inline IdlePeek classify_idle_peek(ssize_t n, int err, const NoticeFrame& frame, bool abort_fails) {
  if (n < 0) return is_transient(err) ? IdlePeek::kNothing : IdlePeek::kGone;
  if (n == 0) return IdlePeek::kGone;
  if (static_cast<size_t>(n) < sizeof(frame) || frame.magic != kNoticeMagic) {
    return IdlePeek::kNothing;
  }
  if (frame.kind == kDeparted) return IdlePeek::kNothing;
  if (!abort_fails && frame.kind == FailureNotice::kAborted) return IdlePeek::kNothing;
  return IdlePeek::kNotice;
}

// For a receive from any source (Connection::incoming): whether a peek at a socket with nothing
// posted shows what such a receive may take or must fail on: a point-to-point message's frame, a
// failure notice, or a peer gone without a goodbye. A collective's frame, a goodbye, a header not
// all in yet, or nothing: false.
inline bool message_waiting(ssize_t n, int err, const NoticeFrame& frame) {
  if (n < 0) return !is_transient(err);
  if (n == 0) return true;
  if (static_cast<size_t>(n) < sizeof(frame)) return false;
  if (frame.magic == kNoticeMagic) return frame.kind != kDeparted;
  return frame.magic == kPointToPointMagic;
}

}  // namespace ccl::transport::tcp
