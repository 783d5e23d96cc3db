// The simulator's engine: every rank's Program run in virtual time over a Network.
//
// Rules, those of ccl's executor and transports:
// - A rank starts after the call's fixed overhead; it posts every op of a round at once and starts
//   the next round when all of them completed.
// - Messages between an ordered pair leave one after the other in the order they were posted
//   (one connection, head-of-line): the sender spends its share of the route's latency
//   (Route::send_us), the bytes flow over the route's resources, then travel for the rest of the
//   latency while the next message may already start (the wire is a pipeline). Sends are eager:
//   a send completes when its bytes left, whether or not the receive was posted (the
//   transports' slot rings and socket buffers); the receiver has them the rest of the latency
//   later.
// - The k-th receive a rank posts from a peer takes the k-th message of that channel. If it was
//   posted when the bytes started to flow, it completes with their arrival (a RecvReduce, or any
//   receive over shared memory, also takes the receiver's core while they flow: it reduces or
//   copies out as the pieces come); otherwise the receive completes after a local pass over them
//   (copy or reduction) once both it is posted and they arrived.
// - Local copies and reductions run on the rank's core (Network::core_of) at copy_gbps and
//   reduce_gbps; they share it with the reductions of its incoming messages.
// - Bandwidth is shared fairly (network.h). Events at equal times run in the order they were made,
//   so a run is deterministic.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "network.h"
#include "program.h"

namespace ccl::sim {

/// One step of a run's critical path: the chain of ops, each waiting for the one before it, that
/// ends when the last rank finishes. A message step runs from when its bytes could leave (its send
/// posted, or the message before it on the same connection gone) to their arrival when the path
/// goes on at the receiver: its bytes at the share of its bottleneck, then the route's latency;
/// to when they left when it goes on at the sender (no latency). A local step is a copy or
/// reduction on the rank's core, the pass over bytes that arrived before their receive, or the
/// fixed overhead of a later call.
/// Consecutive steps touch: each begins where the one it waited for ended.
struct PathStep {
  int rank = 0;  // the rank that ran it (over a quotient: its representative)
  uint32_t round = 0;
  OpKind kind = OpKind::Copy;  // Send for a message (rank sends to peer), else the local work's op
  int peer = -1;
  uint64_t bytes = 0;
  double begin_us = 0;
  double end_us = 0;
  double latency_us = 0;    // a message's route latency when inside [begin, end]
  const char* link = "";    // a message's link class ("shm", "net", ...)
  int64_t bottleneck = -1;  // the resource that bound its bytes longest (network index)
};

struct SimResult {
  double time_us = 0;             // when the last rank finished
  int last_rank = 0;              // which rank that was
  std::vector<double> finish_us;  // by rank
  uint64_t events = 0;            // events processed (the cost of the run)
  uint64_t messages = 0;
  std::vector<PathStep> critical_path;  // first step first; filled when simulate() explains
};

struct SimOptions {
  /// Ranks r and r + period behave alike: only 0..period-1 run (0: every rank; below).
  int period = 0;
  /// The quotient's moves are r -> r ^ kP (n and P powers of two), not r -> r + kP: the
  /// symmetry of the power-of-two exchanges (recursive doubling, Rabenseifner), whose partner
  /// r ^ 2^d moves with r only under XOR.
  bool xor_symmetry = false;
  /// Trace the critical path (SimResult::critical_path).
  bool explain = false;
  /// The rate of the resources that are a CPU copying through memory (Resource::memory: shm
  /// ports, cores) relative to their figures, which were measured in cache: below 1 when the
  /// call's buffers do not fit (SimModel's memory_scale).
  double memory_scale = 1;
};

/// Runs `programs` (one per rank of `network`) to completion. Throws ccl::Error (cclInternalError)
/// naming the ranks and rounds still waiting when no event is left (a schedule that deadlocks), or
/// when a program's peer is outside the network.
///
/// With options.period P (0: none), only ranks 0..P-1 run (`programs` has P entries): the quotient
/// of a job whose ranks r and r + P behave alike. That holds when the network maps onto itself
/// moving every rank by P (Network::symmetry_period divides P) and rank r + P's program is rank r's
/// with every peer moved by P (plan.cc checks it). A message rank r sends to rank q then reaches
/// q's representative q mod P, from the sender moved as far; shared resources are the
/// representatives', so contention on them is counted as in the whole job. Times are exact for
/// such jobs, not an approximation: every rank of an orbit does the same at the same time.
///
/// With options.explain, the result also carries the critical path (PathStep): every op's
/// completion is traced and the chain is followed back from the last rank's last op.
SimResult simulate(const Network& network, std::span<const Program> programs,
                   const SimOptions& options = {});

}  // namespace ccl::sim
