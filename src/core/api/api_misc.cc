#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.h"
#include "core/api/api_guard.h"
#include "topology/render.h"
#include "topology/topology_xml.h"

using namespace ccl;

extern "C" {

cclResult_t cclGetVersion(int* version) {
  return guarded(kNoComm, "cclGetVersion", [&] {
    if (version == nullptr) throw_error(cclInvalidArgument, "cclGetVersion: version is NULL");
    *version = CCL_VERSION_CODE;
  });
}

cclResult_t cclGetTopologyText(char* buf, size_t size, size_t* length) {
  return guarded(kNoComm, "cclGetTopologyText", [&] {
    if (buf == nullptr && size != 0) {
      throw_error(cclInvalidArgument, "cclGetTopologyText: buf is NULL with size %zu", size);
    }
    const std::string text = topo::render_text(topo::system_topology());
    if (length != nullptr) *length = text.size();
    if (size == 0) return;
    const size_t n = std::min(text.size(), size - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  });
}

const char* cclGetErrorString(cclResult_t result) {
  switch (result) {
    case cclSuccess:
      return "no error";
    case cclUnhandledCudaError:
      return "unhandled cuda error (run with CCL_DEBUG=INFO for details)";
    case cclSystemError:
      return "unhandled system error (run with CCL_DEBUG=INFO for details)";
    case cclInternalError:
      return "internal error - please report this issue to the ccl developers";
    case cclInvalidArgument:
      return "invalid argument (run with CCL_DEBUG=WARN for details)";
    case cclInvalidUsage:
      return "invalid usage (run with CCL_DEBUG=WARN for details)";
    case cclRemoteError:
      return "remote process exited or there was a network error";
    case cclInProgress:
      return "operation in progress";
    case cclTimeout:
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

const char* cclGetLastError(cclComm_t comm) {
  Communicator* impl = impl_of(comm);
  return impl != nullptr ? impl->last_error() : thread_last_error();
}

}  // extern "C"
