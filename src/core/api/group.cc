#include "core/api/group.h"

#include <thread>
#include <vector>

#include "base/error.h"
#include "core/api/api_guard.h"

namespace ccl::group {

namespace {

struct Collective {
  const char* function;
  std::function<void(Communicator&)> run;
  DeviceCall device;
};

// One communicator's share of a group.
struct Part {
  std::shared_ptr<Communicator> comm;
  cclStream* stream = nullptr;
  std::vector<algo::PointToPoint> p2p;
  std::vector<std::byte*> buffers;  // p2p[i]'s buffer
  std::vector<Collective> collectives;
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

// Runs a part; the first failure stops it (the communicator is unusable after one anyway).
cclResult_t run_part(Part& part) {
  Communicator& comm = *part.comm;
  cclResult_t result = cclSuccess;
  if (!part.p2p.empty()) {
    result =
        guarded(&comm, "cclSend/cclRecv", [&] { comm.point_to_point(part.p2p, part.buffers); });
  }
  for (const Collective& c : part.collectives) {
    if (result != cclSuccess) break;
    result = guarded(&comm, c.function, [&] { c.run(comm); });
  }
  return result;
}

// A part on a ccl stream made from a CUDA stream, in the part's order: the sends and receives,
// then the collectives, each queued on the CUDA stream where the communicator runs it on the
// device, else as host work of its own.
void queue_on_cuda(Part& part) {
  auto host = [&](std::function<cclResult_t(Communicator&)> work, const char* what) {
    queue_on_stream(part.stream, part.comm, std::move(work), what);
  };
  if (!part.p2p.empty()) {
    DeviceCall call;
    call.kind = OpKind::SendRecv;
    call.function = "cclSend/cclRecv";
    call.p2p = part.p2p;
    call.buffers = part.buffers;
    if (!queue_device(part.stream, part.comm, call)) {
      auto p2p =
          std::make_shared<std::pair<std::vector<algo::PointToPoint>, std::vector<std::byte*>>>(
              std::move(part.p2p), std::move(part.buffers));
      host(
          [p2p](Communicator& comm) {
            return guarded(&comm, "cclSend/cclRecv",
                           [&] { comm.point_to_point(p2p->first, p2p->second); });
          },
          "cclSend/cclRecv");
    }
  }
  for (Collective& c : part.collectives) {
    if (queue_device(part.stream, part.comm, c.device)) continue;
    auto collective = std::make_shared<Collective>(std::move(c));
    host(
        [collective](Communicator& comm) {
          return guarded(&comm, collective->function, [&] { collective->run(comm); });
        },
        collective->function);
  }
}

}  // namespace

bool queue_device(cclStream* stream, const std::shared_ptr<Communicator>& comm,
                  const DeviceCall& call) {
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
  std::vector<Part*> now;
  bool in_background = false;
  for (Part& part : parts) {
    if (part.stream == nullptr && !part.comm->blocking()) {
      // A non-blocking communicator runs its share on its own queue (cclInProgress).
      auto queued = std::make_shared<Part>(std::move(part));
      cclResult_t r = guarded(queued->comm.get(), "cclGroupEnd", [&] {
        queued->comm->enqueue_background([queued](Communicator&) { return run_part(*queued); });
      });
      if (r != cclSuccess) return r;
      in_background = true;
      continue;
    }
    if (part.stream == nullptr) {
      now.push_back(&part);
      continue;
    }
    if (part.stream->on_cuda()) {
      cclResult_t r = guarded(part.comm.get(), "cclGroupEnd", [&] { queue_on_cuda(part); });
      if (r != cclSuccess) return r;
      continue;
    }
    auto queued = std::make_shared<Part>(std::move(part));
    queue_on_stream(queued->stream, queued->comm,
                    [queued](Communicator&) { return run_part(*queued); });
  }
  std::vector<cclResult_t> results(now.size(), cclSuccess);
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < now.size(); ++i) {
    helpers.emplace_back([&results, &now, i] { results[i] = run_part(*now[i]); });
  }
  if (!now.empty()) results[0] = run_part(*now[0]);
  for (auto& t : helpers) t.join();
  for (cclResult_t r : results) {
    if (r != cclSuccess) return r;
  }
  return in_background ? cclInProgress : cclSuccess;
}

void add_collective(const std::shared_ptr<Communicator>& comm, cclStream* stream,
                    const char* function, std::function<void(Communicator&)> op,
                    const DeviceCall& device) {
  part_for(comm, stream, function)
      .collectives.push_back(Collective{function, std::move(op), device});
}

void add_point_to_point(const std::shared_ptr<Communicator>& comm, cclStream* stream,
                        const char* function, algo::PointToPoint op, std::byte* buffer) {
  Part& part = part_for(comm, stream, function);
  part.p2p.push_back(op);
  part.buffers.push_back(buffer);
}

}  // namespace ccl::group
