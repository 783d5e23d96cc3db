// The check every network connection's post_send()/post_recv() makes of a request, and the reset
// that hands it to the transport (transport.h: "owned by the transport while posted").
#pragma once

#include "base/error.h"
#include "transport/transport.h"

namespace ccl::transport {

// Throws cclInvalidUsage ("<transport>: post_send to rank <peer> without a buffer") for a null
// request or one with bytes and no data; else zeroes done_bytes and clears complete.
inline void start_send(const char* transport, SendRequest* request, int peer) {
  if (request == nullptr || (request->bytes > 0 && request->data == nullptr)) {
    throw_error(cclInvalidUsage, "%s: post_send to rank %d without a buffer", transport, peer);
  }
  request->done_bytes = 0;
  request->complete = false;
}

// As start_send, for a receive without a sink ("... post_recv from rank <peer> without a sink").
inline void start_recv(const char* transport, RecvRequest* request, int peer) {
  if (request == nullptr || (request->bytes > 0 && request->sink == nullptr)) {
    throw_error(cclInvalidUsage, "%s: post_recv from rank %d without a sink", transport, peer);
  }
  request->done_bytes = 0;
  request->complete = false;
}

}  // namespace ccl::transport
