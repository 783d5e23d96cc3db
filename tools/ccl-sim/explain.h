// A run's critical path in words (ccl-sim --explain): where the time of the last rank went, by
// kind (the call's fixed overhead, link latency, bytes held back by a resource, local copies and
// reductions), and the chain of steps itself: which rank, which step, which link.
#pragma once

#include <cstddef>
#include <string>

#include "engine.h"
#include "network.h"

namespace ccl::sim {

/// `result` must come from simulate() with options.explain over `network`. Prints a breakdown whose
/// parts add up to the run's time, then the steps (all of them up to `max_steps`, else the first
/// and last max_steps / 2), every line starting with '#' so that parsers of the rows skip them.
/// A path that was not traced (a run too large to trace) is said so in one line.
std::string describe_path(const SimResult& result, const Network& network, size_t max_steps);

/// "rank tx" for "rank 12 tx": a resource's kind, to add up the time held by every rank's port.
std::string resource_kind(const std::string& name);

}  // namespace ccl::sim
