#include "core/api/group.h"

#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "core/api/api_guard.h"

namespace ccl::group {

namespace {

// One communicator's share of a group.
struct Part {
  std::shared_ptr<Communicator> comm;
  cclStream* stream = nullptr;
  Call p2p = make_call(OpKind::SendRecv, "cclSend/cclRecv", nullptr, nullptr, 0, cclUint8);
  std::vector<Call> collectives;

  // The part's calls in the order they run: its sends and receives (posted together: pairs
  // posted in any order on the two sides cannot deadlock), then its collectives as called.
  std::vector<Call> take_calls() {
    std::vector<Call> calls;
    calls.reserve(collectives.size() + 1);
    if (p2p.lists) calls.push_back(std::move(p2p));
    for (Call& c : collectives) calls.push_back(std::move(c));
    collectives.clear();
    return calls;
  }
};

struct State {
  int depth = 0;
  std::vector<Part> parts;
};

thread_local State state;

Part& part_for(const std::shared_ptr<Communicator>& comm, cclStream* stream, const char* function) {
  for (Part& part : state.parts) {
    if (part.comm != comm) continue;
    if (part.stream != stream) {
      throw_error(cclInvalidUsage,
                  "%s: this communicator's operations in one group must all use the same stream",
                  function);
    }
    return part;
  }
  Part& part = state.parts.emplace_back();
  part.comm = comm;
  part.stream = stream;
  return part;
}

// A part on a ccl stream made from a CUDA stream, in the part's order: each call queued on the
// CUDA stream where the communicator runs it on the device, else as host work of its own.
void queue_on_cuda(Part& part) {
  for (Call& call : part.take_calls()) {
    if (!queue_device(part.stream, part.comm, call)) {
      queue_on_stream(part.stream, part.comm, std::move(call));
    }
  }
}

void queue_work(cclStream* stream, Communicator& comm, StreamWork work, const char* what) {
  comm.queued_begin();
  try {
    stream->enqueue(std::move(work), comm.options().timeout, what);
  } catch (...) {
    comm.queued_end();  // not queued after all
    throw;
  }
}

}  // namespace

void queue_on_stream(cclStream* stream, std::shared_ptr<Communicator> comm, Call call) {
  Communicator& c = *comm;
  const char* what = call.function;
  queue_work(stream, c, StreamWork::of_call(std::move(comm), std::move(call)), what);
}

void queue_on_stream(cclStream* stream, std::shared_ptr<Communicator> comm,
                     std::vector<Call> calls) {
  Communicator& c = *comm;
  queue_work(stream, c, StreamWork::of_group(std::move(comm), std::move(calls)), "cclGroupEnd");
}

bool queue_device(cclStream* stream, const std::shared_ptr<Communicator>& comm, const Call& call) {
  using Kind = OpKind;
  const bool fixed_count = call.kind != Kind::AllGatherV && call.kind != Kind::AlltoAllV &&
                           call.kind != Kind::SendRecv && call.kind != Kind::Barrier;
  if (fixed_count && call.count == 0) return false;  // nothing to do: the host path's no-op
  return stream->queue_on_cuda(comm,
                               [&](void* cuda) { return comm->device_collective(call, cuda); });
}

bool active() { return state.depth > 0; }

void start() { ++state.depth; }

cclResult_t end() {
  if (state.depth == 0) {
    return guarded(kNoComm, "cclGroupEnd", [] {
      throw_error(cclInvalidUsage, "cclGroupEnd: no group is open (cclGroupStart was not called)");
    });
  }
  if (--state.depth > 0) return cclSuccess;
  std::vector<Part> parts = std::move(state.parts);
  state.parts.clear();

  // Stream parts are queued; the others run now, the first on this thread, the rest on a thread
  // each, so that one thread may drive several ranks.
  std::vector<std::pair<Communicator*, std::vector<Call>>> now;
  bool in_background = false;
  for (Part& part : parts) {
    if (part.stream == nullptr && !part.comm->blocking()) {
      // A non-blocking communicator runs its share on its own queue (cclInProgress).
      cclResult_t r = guarded(part.comm.get(), "cclGroupEnd",
                              [&] { part.comm->enqueue_background(part.take_calls()); });
      if (r != cclSuccess) return r;
      in_background = true;
      continue;
    }
    if (part.stream == nullptr) {
      now.emplace_back(part.comm.get(), part.take_calls());
      continue;
    }
    if (part.stream->on_cuda()) {
      cclResult_t r = guarded(part.comm.get(), "cclGroupEnd", [&] { queue_on_cuda(part); });
      if (r != cclSuccess) return r;
      continue;
    }
    cclResult_t r = guarded(part.comm.get(), "cclGroupEnd",
                            [&] { queue_on_stream(part.stream, part.comm, part.take_calls()); });
    if (r != cclSuccess) return r;
  }
  std::vector<cclResult_t> results(now.size(), cclSuccess);
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < now.size(); ++i) {
    helpers.emplace_back(
        [&results, &now, i] { results[i] = now[i].first->run_calls(now[i].second); });
  }
  if (!now.empty()) results[0] = now[0].first->run_calls(now[0].second);
  for (auto& t : helpers) t.join();
  for (cclResult_t r : results) {
    if (r != cclSuccess) return r;
  }
  return in_background ? cclInProgress : cclSuccess;
}

void add_collective(const std::shared_ptr<Communicator>& comm, cclStream* stream, Call call) {
  part_for(comm, stream, call.function).collectives.push_back(std::move(call));
}

void add_point_to_point(const std::shared_ptr<Communicator>& comm, cclStream* stream,
                        const char* function, algo::PointToPoint op, std::byte* buffer) {
  Part& part = part_for(comm, stream, function);
  Call::Lists& lists = part.p2p.own_lists();
  lists.p2p.push_back(op);
  lists.buffers.push_back(buffer);
}

}  // namespace ccl::group
