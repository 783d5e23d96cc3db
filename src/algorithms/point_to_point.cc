#include "algorithms/point_to_point.h"

#include <vector>

#include "base/error.h"

namespace ccl::algo {

Schedule point_to_point(int rank, std::span<const PointToPoint> operations) {
  Schedule schedule;
  std::vector<uint32_t> self_sends, self_recvs;
  for (size_t i = 0; i < operations.size(); ++i) {
    const PointToPoint& op = operations[i];
    if (op.bytes == 0) continue;
    const Region region{Buffer::Slot, 0, op.bytes, static_cast<uint32_t>(i)};
    if (op.peer == rank) {
      (op.send ? self_sends : self_recvs).push_back(static_cast<uint32_t>(i));
    } else if (op.send) {
      schedule.add(Step{StepKind::Send, op.peer, region, {}});
    } else {
      schedule.add(Step{StepKind::Recv, op.peer, {}, region});
    }
  }
  if (self_sends.size() != self_recvs.size()) {
    throw_error(cclInvalidUsage,
                "rank %d: %zu send(s) to itself but %zu receive(s) from itself in one group; a "
                "rank's messages to itself must be sent and received in the same group",
                rank, self_sends.size(), self_recvs.size());
  }
  for (size_t k = 0; k < self_sends.size(); ++k) {
    const PointToPoint& send = operations[self_sends[k]];
    const PointToPoint& recv = operations[self_recvs[k]];
    if (send.bytes != recv.bytes) {
      throw_error(cclInvalidUsage,
                  "rank %d: send to itself #%zu has %zu bytes but the matching receive has %zu",
                  rank, k, send.bytes, recv.bytes);
    }
    schedule.add(Step{StepKind::Copy, -1, Region{Buffer::Slot, 0, send.bytes, self_sends[k]},
                      Region{Buffer::Slot, 0, recv.bytes, self_recvs[k]}});
  }
  schedule.end_round();
  return schedule;
}

}  // namespace ccl::algo
