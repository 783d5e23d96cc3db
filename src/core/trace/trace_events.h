// What a trace (CCL_TRACE_FILE, trace_recorder.h) holds: one record per operation and one per
// executor round, in the steady clock's nanoseconds, and the metadata of the file they go to
// (trace_writer.h turns them into Chrome / Perfetto trace events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ccl::trace {

// One operation: a complete event ("ph":"X") on its rank's track. The strings are static
// (literals): records keep the pointers.
struct OpEvent {
  uint64_t seq = 0;                 // the communicator's operation sequence number
  const char* name = "";            // "allreduce", "send", "recv", "send/recv", ...
  uint64_t bytes = 0;               // the size nccl-tests reports for the call (op_bytes)
  uint64_t count = 0;               // elements as the caller passed them; send/recv: operations
  int datatype = -1;                // cclDataType_t; -1: none
  int op = -1;                      // cclRedOp_t (PreMulSum ops are >= cclNumOps); -1: none
  int root = -1;                    // -1: none
  int peer = -1;                    // send/recv: the first operation's peer; -1: none
  const char* algorithm = nullptr;  // null: none chosen (send/recv, an early return)
  const char* protocol = nullptr;   // null: none
  int result = 0;                   // cclResult_t
  int64_t start_ns = 0, end_ns = 0;
};

// One executor round of an operation, nested in its slice (same track, inside its times).
struct RoundEvent {
  uint32_t index = 0;     // the k-th round the operation ran ("round k")
  bool completed = true;  // false: the operation failed (or timed out) in this round
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint32_t peers_begin = 0, npeers = 0;  // its peers: TraceData::peers[begin, begin + n)
  int64_t start_ns = 0, end_ns = 0;
};

// Everything one file holds.
struct TraceData {
  int rank = 0, nranks = 1;
  std::string host;             // for "rank R (host H)"
  std::string comm_name;        // cclConfig_t.commName (may be empty)
  uint64_t dropped = 0;         // events beyond CCL_TRACE_MAX_EVENTS
  int64_t clock_offset_ns = 0;  // system_clock - steady_clock, added to every time
  std::vector<OpEvent> ops;
  std::vector<RoundEvent> rounds;  // in time order, like ops
  std::vector<int> peers;
};

// system_clock - steady_clock in nanoseconds, measured once per process, so that every
// communicator of the process converts its steady-clock times the same way.
int64_t system_clock_offset_ns();

}  // namespace ccl::trace
