#include <thread>

#include "base/error.h"
#include "core/api/api_guard.h"
#include "core/stream/stream.h"

using namespace ccl;

namespace {
cclStream* checked(cclStream_t stream, const char* function) {
  if (stream == nullptr) throw_error(cclInvalidArgument, "%s: stream is NULL", function);
  if (stream->magic != cclStream::kMagic) {
    throw_error(cclInvalidArgument, "%s: stream is not a valid cclStream_t", function);
  }
  return stream;
}

cclEvent* checked(cclEvent_t event, const char* function) {
  if (event == nullptr) throw_error(cclInvalidArgument, "%s: event is NULL", function);
  if (event->magic != cclEvent::kMagic) {
    throw_error(cclInvalidArgument, "%s: event is not a valid cclEvent_t", function);
  }
  return event;
}

// The result of a call whose body sets `result` unless the guard itself fails.
template <class Body>
cclResult_t with_result(const char* function, Body&& body) {
  cclResult_t result = cclSuccess;
  const cclResult_t bad = guarded(kNoComm, function, [&] { result = body(); });
  return bad != cclSuccess ? bad : result;
}
}  // namespace

extern "C" {

cclResult_t cclStreamCreate(cclStream_t* stream) {
  return guarded(kNoComm, "cclStreamCreate", [&] {
    if (stream == nullptr) throw_error(cclInvalidArgument, "cclStreamCreate: stream is NULL");
    *stream = new cclStream;
  });
}

cclResult_t cclStreamFromCuda(struct CUstream_st* cudaStream, cclStream_t* stream) {
  return guarded(kNoComm, "cclStreamFromCuda", [&] {
    if (stream == nullptr) throw_error(cclInvalidArgument, "cclStreamFromCuda: stream is NULL");
    *stream = new cclStream(cudaStream);
  });
}

cclResult_t cclStreamSynchronize(cclStream_t stream) {
  return with_result("cclStreamSynchronize",
                     [&] { return checked(stream, "cclStreamSynchronize")->synchronize(); });
}

cclResult_t cclStreamQuery(cclStream_t stream) {
  return with_result("cclStreamQuery", [&] { return checked(stream, "cclStreamQuery")->query(); });
}

cclResult_t cclStreamDestroy(cclStream_t stream) {
  return guarded(kNoComm, "cclStreamDestroy", [&] {
    checked(stream, "cclStreamDestroy");
    stream->magic = 0;
    delete stream;
  });
}

cclResult_t cclEventCreate(cclEvent_t* event) {
  return guarded(kNoComm, "cclEventCreate", [&] {
    if (event == nullptr) throw_error(cclInvalidArgument, "cclEventCreate: event is NULL");
    *event = new cclEvent;
  });
}

cclResult_t cclEventDestroy(cclEvent_t event) {
  return guarded(kNoComm, "cclEventDestroy", [&] {
    checked(event, "cclEventDestroy");
    event->magic = 0;
    delete event;  // the work it marked goes on; its stream's core outlives the event
  });
}

cclResult_t cclEventRecord(cclEvent_t event, cclStream_t stream) {
  return guarded(kNoComm, "cclEventRecord", [&] {
    checked(event, "cclEventRecord");
    // The NULL stream's calls are complete when they return: nothing to mark.
    event->record(stream == nullptr ? StreamPoint{} : checked(stream, "cclEventRecord")->point());
  });
}

cclResult_t cclEventQuery(cclEvent_t event) {
  return with_result("cclEventQuery",
                     [&] { return checked(event, "cclEventQuery")->point().status(); });
}

cclResult_t cclEventSynchronize(cclEvent_t event) {
  return with_result("cclEventSynchronize", [&] {
    return checked(event, "cclEventSynchronize")->point().reach(true, "cclEventSynchronize");
  });
}

cclResult_t cclStreamWaitEvent(cclStream_t stream, cclEvent_t event) {
  const char* fn = "cclStreamWaitEvent";
  return with_result(fn, [&] {
    const StreamPoint point = checked(event, fn)->point();
    if (stream == nullptr) return point.reach(true, fn);  // the NULL stream: wait now
    cclStream* waiter = checked(stream, fn);
    // The device work before the point: a stream made from a CUDA stream waits for it there (no
    // host wait); a stream of host work waits for it in the queued wait below.
    if (point.device && waiter->on_cuda()) {
      waiter->wait_on_cuda(*point.device->event);
    }
    const bool device_pending =
        point.device && !waiter->on_cuda() && point.device->status() == cclInProgress;
    if (!point.core || (point.core->status(point.seq) == cclSuccess && !device_pending)) {
      return cclSuccess;
    }
    waiter->enqueue(StreamWork::wait_for(point, fn), point.core->stall_bound());
    return cclSuccess;
  });
}

}  // extern "C"
