// cclGroupStart/End, per thread as in NCCL. Inside a group, operations are checked when they are
// called (argument errors come from the call that has them) and queued; the outermost
// cclGroupEnd issues them. For each communicator, the group's sends and receives are posted
// together first (one round: pairs posted in any order on the two sides cannot deadlock), then
// its collectives run in the order they were called. Communicators of one group progress
// concurrently (a thread each), so one thread may drive several ranks, as with NCCL.
// A communicator's operations in one group share one stream: with a stream they are queued on it
// as one item (its calls, in order); with the NULL stream cclGroupEnd returns when they are
// complete. The group holds calls (call/call.h), not closures.
#pragma once

#include <memory>
#include <vector>

#include "algorithms/point_to_point.h"
#include "ccl/ccl.h"
#include "core/call/call.h"
#include "core/comm/comm.h"
#include "core/stream/stream.h"

namespace ccl::group {

bool active();  // inside cclGroupStart ... cclGroupEnd on this thread
void start();
// Issues the queued operations when the outermost group ends; InvalidUsage without a start.
cclResult_t end();

// Queue a call whose arguments were checked. Throw InvalidUsage when the communicator already
// has operations in this group on a different stream.
void add_collective(const std::shared_ptr<Communicator>& comm, cclStream* stream, Call call);
void add_point_to_point(const std::shared_ptr<Communicator>& comm, cclStream* stream,
                        const char* function, algo::PointToPoint op, std::byte* buffer);

// On a ccl stream made from a CUDA stream: queues `call` on the CUDA stream at once if the
// communicator runs it on the device (device buffers on a device world), in the stream's order;
// false if it does not (the caller queues host work instead). Throws what the call throws.
bool queue_device(cclStream* stream, const std::shared_ptr<Communicator>& comm, const Call& call);

// Queues `call` (or a group's part, `calls`, in order) on `stream`, counted as in flight on `comm`
// until it ran (cclCommFinalize waits). A call is stored in place: queueing one allocates
// nothing.
void queue_on_stream(cclStream* stream, std::shared_ptr<Communicator> comm, Call call);
void queue_on_stream(cclStream* stream, std::shared_ptr<Communicator> comm,
                     std::vector<Call> calls);

}  // namespace ccl::group
