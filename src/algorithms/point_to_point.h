// Sends and receives of one group (cclGroupStart/End) as a schedule. Every operation of the group
// goes into one round, so all of them are posted before any is waited for: pairs posted in any
// order on the two sides cannot deadlock, and messages between one pair still match in the order
// they were posted (steps of a round are posted in order). A send to this rank itself is matched
// with this rank's receives from itself, in posted order, and becomes a local copy.
//
// Each operation has its own buffer, so regions are Buffer::Slot (slot i = operation i's
// buffer) and counted in bytes: run with ExecOp::elem_size = 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "algorithms/schedule.h"

namespace ccl::algo {

struct PointToPoint {
  bool send = true;
  int peer = 0;
  size_t bytes = 0;
};

// Operations of zero bytes are left out (both sides agree on the sizes, so both leave them out).
// Throws InvalidUsage when a send to self and a receive from self do not pair up with equal sizes.
Schedule point_to_point(int rank, std::span<const PointToPoint> operations);

}  // namespace ccl::algo
