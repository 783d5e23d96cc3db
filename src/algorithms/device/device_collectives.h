// The device programs (device_program.h) of every collective among the ranks of one host: pure
// functions of the call's shape, as the host schedules are. Counts are in elements, offsets in
// the programs in bytes. Every rank builds its own program from the same arguments (the
// v-collectives' counts as every rank passes them), so the programs of one call fit together
// without any exchange.
//
// How each moves its data (S: the bytes a rank contributes, n ranks, a chunk at a time through a
// scratch half, the halves alternating so that a rank fills one while the others read the other):
//   allreduce one-shot  every rank copies its chunk into its scratch; every rank reduces all n
//                       chunks itself, in rank order, so every rank gets the same bits. Reads
//                       n x S per rank: for small messages (two flag rounds).
//   allreduce two-shot  every rank copies its chunk; rank r reduces slice r of every chunk into
//                       its own scratch, then every rank copies every reduced slice. Reads 2 x S
//                       per rank: for large messages (four flag rounds).
//   broadcast           the root copies into its scratch; the others copy from it.
//   reduce              every rank but the root copies into its scratch; the root reduces.
//   allgather(v)        every rank copies its block into its scratch; every rank copies all.
//   reducescatter       every rank copies its input; rank r reduces block r of every input.
//   alltoall(v)         rank r's scratch holds a piece for every peer (a sub-slot each); every
//                       rank copies its pieces out of every peer's scratch. The v-collectives
//                       and send/recv groups handshake per pair, so that no rank needs to know
//                       the others' counts.
//   send/recv groups    each pair's messages, in posted order, chunk by chunk through the
//                       sender's sub-slot for that receiver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "algorithms/device/device_program.h"
#include "algorithms/point_to_point.h"

namespace ccl::algo::device {

struct Shape {
  int nranks = 1;
  int rank = 0;
  size_t elem_size = 1;
  uint64_t half_bytes = 0;  // one scratch half; at least nranks * 16 bytes
};

// How the reducing collectives treat the rank's own input (the communicator's reduction op).
struct Reduction {
  bool scale_input = false;  // PreMulSum: the own input times the scalar is what is reduced
  bool average = false;      // avg: the result is divided by nranks
};

enum class AllReduceAlgorithm : uint8_t { OneShot, TwoShot };

Program all_reduce(const Shape& shape, uint64_t count, AllReduceAlgorithm algorithm,
                   Reduction reduction);
// in_place: sendbuff == recvbuff (at the root).
Program broadcast(const Shape& shape, uint64_t count, int root, bool in_place);
Program reduce(const Shape& shape, uint64_t count, int root, Reduction reduction);
// in_place: sendbuff == recvbuff + rank * count * elem_size.
Program all_gather(const Shape& shape, uint64_t count, bool in_place);
// in_place: sendbuff == recvbuff + displs[rank] * elem_size.
Program all_gather_v(const Shape& shape, std::span<const size_t> counts,
                     std::span<const size_t> displs, bool in_place);
Program reduce_scatter(const Shape& shape, uint64_t recvcount, Reduction reduction);
// count: elements to each peer. in_place: sendbuff == recvbuff.
Program all_to_all(const Shape& shape, uint64_t count, bool in_place);
// in_place (sendbuff == recvbuff): the input is first copied into Temp.
Program all_to_all_v(const Shape& shape, std::span<const size_t> sendcounts,
                     std::span<const size_t> sdispls, std::span<const size_t> recvcounts,
                     std::span<const size_t> rdispls, bool in_place);
// The group's operations, slot i = operation i's buffer, sizes in bytes (shape.elem_size 1). A
// send to this rank itself pairs with its receives from itself in posted order (the caller
// checked the sizes: algo::point_to_point's rule).
Program point_to_point(const Shape& shape, std::span<const PointToPoint> operations);
Program barrier(const Shape& shape);

// The byte range [lo, lo + len) of part `part` of `total` bytes split into `parts`, balanced in
// units of `granule` bytes (the remainder to the first parts).
struct Split {
  uint64_t lo = 0;
  uint64_t len = 0;
};
Split split(uint64_t total, int parts, int part, uint64_t granule);

}  // namespace ccl::algo::device
