#include "core/api_guard.h"
#include "core/error.h"
#include "core/stream.h"

using namespace ccl;

namespace {
cclStream* checked(cclStream_t stream, const char* function) {
  if (stream == nullptr) throw_error(cclInvalidArgument, "%s: stream is NULL", function);
  if (stream->magic != cclStream::kMagic) {
    throw_error(cclInvalidArgument, "%s: stream is not a valid cclStream_t", function);
  }
  return stream;
}
}  // namespace

extern "C" {

cclResult_t cclStreamCreate(cclStream_t* stream) {
  return guarded(kNoComm, "cclStreamCreate", [&] {
    if (stream == nullptr) throw_error(cclInvalidArgument, "cclStreamCreate: stream is NULL");
    *stream = new cclStream;
  });
}

cclResult_t cclStreamSynchronize(cclStream_t stream) {
  cclResult_t result = cclSuccess;
  cclResult_t bad = guarded(kNoComm, "cclStreamSynchronize", [&] {
    result = checked(stream, "cclStreamSynchronize")->synchronize();
  });
  return bad != cclSuccess ? bad : result;
}

cclResult_t cclStreamQuery(cclStream_t stream) {
  cclResult_t result = cclSuccess;
  cclResult_t bad = guarded(kNoComm, "cclStreamQuery",
                            [&] { result = checked(stream, "cclStreamQuery")->query(); });
  return bad != cclSuccess ? bad : result;
}

cclResult_t cclStreamDestroy(cclStream_t stream) {
  return guarded(kNoComm, "cclStreamDestroy", [&] {
    checked(stream, "cclStreamDestroy");
    stream->magic = 0;
    delete stream;
  });
}

}  // extern "C"
