// What the tuner chooses between (collective x algorithm x protocol), their names, and the user's
// restriction of that choice through CCL_ALGO and CCL_PROTO (DESIGN.md principle 3: topology
// decides, the tuner explains, the user may override).
//
// Syntax (NCCL's for NCCL_ALGO / NCCL_PROTO since 2.24; names are case-insensitive and blanks
// around names, ':', ',', ';' and '^' are ignored):
//   ring,tree                        only these
//   ^tree                            all but these
//   allreduce:tree,ring;broadcast:^tree
//                                    per collective: ';'-separated entries "collective:list"
//   ring;allreduce:tree              an entry without "collective:" applies to every collective not
//                                    named in another entry. As in NCCL, only the first entry may
//                                    leave the collective out; elsewhere that is an error.
//   (empty)                          everything
// A collective may be named once; an unknown collective or name, an empty name (",,", "^" or
// "allreduce:" alone) is an InvalidUsage error naming the variable, the token and the valid
// names. Empty entries (a trailing ';') are ignored. NCCL fails an operation when the list leaves
// nothing usable for it; ccl instead falls back to its own choice and says so (tuner.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ccl::tune {

// `bytes` given to the tuner for each collective is the count argument of the call times the
// element size: allreduce, broadcast, reduce: the vector; allgather: what each rank sends;
// reducescatter: what each rank receives; alltoall: what each rank sends to each peer; barrier: 0.
enum class Collective : uint8_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Barrier
};
// Declaration order is the tie-break preference order of the tuner.
enum class Algorithm : uint8_t {
  Direct,             // the shared window of one host (algorithms/direct.h)
  Ring,               // ring; broadcast and reduce: a pipelined chain
  Tree,               // allreduce: double binary tree; broadcast, reduce: pipelined binary tree
  RecursiveDoubling,  // allreduce
  Rabenseifner,       // allreduce
  Hierarchical,       // allreduce: intra-host reduce-scatter, inter-host allreduce, allgather
  Pairwise,           // alltoall: n-1 rounds, each rank exchanging with one partner
  Dissemination,      // barrier: ceil(log2 n) rounds of empty messages
};
// LL: each piece of a schedule step in one message (no chunking; for direct allreduce: one-shot).
// Simple: pieces cut into pipelined chunks (direct allreduce: two-shot). LL128: never available.
enum class Protocol : uint8_t { LL, LL128, Simple };

inline constexpr int kNumCollectives = 7;
inline constexpr int kNumAlgorithms = 8;
inline constexpr int kNumProtocols = 3;

inline constexpr std::array<Collective, kNumCollectives> kCollectives{
    Collective::AllReduce,     Collective::Broadcast, Collective::Reduce, Collective::AllGather,
    Collective::ReduceScatter, Collective::AlltoAll,  Collective::Barrier};
inline constexpr std::array<Algorithm, kNumAlgorithms> kAlgorithms{
    Algorithm::Direct,       Algorithm::Ring,
    Algorithm::Tree,         Algorithm::RecursiveDoubling,
    Algorithm::Rabenseifner, Algorithm::Hierarchical,
    Algorithm::Pairwise,     Algorithm::Dissemination};
inline constexpr std::array<Protocol, kNumProtocols> kProtocols{Protocol::LL, Protocol::LL128,
                                                                Protocol::Simple};

// "allreduce" "broadcast" "reduce" "allgather" "reducescatter" "alltoall" "barrier"
const char* collective_name(Collective collective);
// "direct" "ring" "tree" "recursive_doubling" "rabenseifner" "hierarchical" "pairwise"
// "dissemination"
const char* algorithm_name(Algorithm algorithm);
// "LL" "LL128" "Simple"
const char* protocol_name(Protocol protocol);
// Case-insensitive; false (and *out untouched) when `text` is no such name.
bool parse_collective(std::string_view text, Collective* out);
bool parse_algorithm(std::string_view text, Algorithm* out);
bool parse_protocol(std::string_view text, Protocol* out);

// Which algorithms and protocols CCL_ALGO and CCL_PROTO allow, per collective. Allocation-free
// queries (the tuner asks on every collective call).
class Selection {
 public:
  using Mask = uint16_t;  // bit i: name i allowed
  Selection();            // everything allowed

  // Parses the two variables' values (see the syntax above). Throws InvalidUsage.
  static Selection parse(const std::string& algo_env, const std::string& proto_env);

  bool allows(Collective collective, Algorithm algorithm) const {
    return (algorithms_[index(collective)] >> static_cast<unsigned>(algorithm)) & 1u;
  }
  bool allows(Collective collective, Protocol protocol) const {
    return (protocols_[index(collective)] >> static_cast<unsigned>(protocol)) & 1u;
  }

 private:
  static size_t index(Collective collective) { return static_cast<size_t>(collective); }

  std::array<Mask, kNumCollectives> algorithms_;  // bit a: algorithm a allowed
  std::array<Mask, kNumCollectives> protocols_;   // bit p: protocol p allowed
};

}  // namespace ccl::tune
