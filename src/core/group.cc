#include "core/group.h"

#include <thread>
#include <vector>

#include "core/api_guard.h"
#include "base/error.h"

namespace ccl::group {

namespace {

struct Collective {
  const char* function;
  std::function<void(Communicator&)> run;
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

}  // namespace

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
                    const char* function, std::function<void(Communicator&)> op) {
  part_for(comm, stream, function).collectives.push_back(Collective{function, std::move(op)});
}

void add_point_to_point(const std::shared_ptr<Communicator>& comm, cclStream* stream,
                        const char* function, algo::PointToPoint op, std::byte* buffer) {
  Part& part = part_for(comm, stream, function);
  part.p2p.push_back(op);
  part.buffers.push_back(buffer);
}

}  // namespace ccl::group
