#include "core/stream/stream_point.h"

#include "base/deadline.h"
#include "core/stream/stream_core.h"

namespace ccl {

cclResult_t DeviceMark::status() const {
  const cuda::ContextScope scope(context);
  const bool done = event->done();
  for (const auto& c : comms) {
    if (auto comm = c.lock()) {
      if (done) comm->poll_device();
      if (comm->async_error() != cclSuccess) return comm->async_error();
    }
  }
  return done ? cclSuccess : cclInProgress;
}

cclResult_t StreamPoint::status() const {
  const cclResult_t host = core ? core->status(seq) : cclSuccess;
  return host == cclSuccess && device ? device->status() : host;
}

cclResult_t StreamPoint::reach(bool run, const char* function) const {
  if (!core) return cclSuccess;
  const bool reached = run ? core->run_until(seq) : core->wait_until(seq);
  if (!reached) core->throw_stalled(function);
  const Deadline until = Deadline::after(core->stall_bound());
  for (int polls = 0;; ++polls) {
    const cclResult_t now = status();
    if (now != cclInProgress) return now;
    if (until.expired()) core->throw_stalled(function);
    poll_pause(polls);
  }
}

}  // namespace ccl
