#include "core/stream/stream_work.h"

#include <optional>
#include <span>
#include <utility>

#include "base/error.h"
#include "cuda/cuda_memory.h"

namespace ccl {

StreamWork StreamWork::of_call(std::shared_ptr<CallTarget> target, Call call) {
  StreamWork work;
  work.target = std::move(target);
  work.call = std::move(call);
  return work;
}

StreamWork StreamWork::of_group(std::shared_ptr<CallTarget> target, std::vector<Call> calls) {
  // An empty list would run the item's default call.
  if (calls.empty()) throw_error(cclInternalError, "a group's part queued without calls");
  StreamWork work;
  work.target = std::move(target);
  work.extra = std::make_unique<Extra>();
  work.extra->group = std::move(calls);
  return work;
}

StreamWork StreamWork::wait_for(StreamPoint point, const char* function) {
  StreamWork work;
  work.extra = std::make_unique<Extra>();
  work.extra->wait = std::move(point);
  work.extra->function = function;
  return work;
}

cclResult_t StreamWork::operator()() noexcept {
  const cclResult_t waited = order != nullptr ? order->wait(ticket, timeout) : cclSuccess;
  cclResult_t result = cclSuccess;
  {
    // The wait above ordered the item's device work after the CUDA work queued before it.
    std::optional<cuda::OrderedByCudaStream> ordered;
    if (order != nullptr) ordered.emplace();
    if (target) {
      result = extra ? target->run_queued(extra->group)
                     : target->run_queued(std::span<const Call>(&call, 1));
    } else if (extra) {
      try {
        result = extra->wait.reach(false, extra->function);
      } catch (...) {
        result = current_exception_result(extra->function);
      }
    }
  }
  if (order != nullptr) order->end(ticket);
  return waited != cclSuccess ? waited : result;
}

}  // namespace ccl
