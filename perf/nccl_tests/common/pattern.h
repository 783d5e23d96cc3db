// Data for the -c check: inputs chosen so that the reduced result is exact in every datatype and
// op whatever the order of the reduction (every partial sum or product is an integer, or a power
// of two, that the type stores exactly), the expected result computed independently of the
// library, and an exact comparison (bitwise; two NaNs compare equal).
//
// avg is checked as the library defines it: the exact sum divided by nranks, rounded to nearest
// even in the datatype for floating types and truncated for integers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ccl/ccl.h"
#include "sweep.h"

namespace ccl::perf {

struct CheckSpec {
  Collective coll;
  cclDataType_t type;
  cclRedOp_t op;  // reductions only
  int root;       // rooted collectives only
  int nranks;
  uint64_t seed;  // changes between checks so stale data never passes
};

// What `rank` contributes at element `index` for a reduction with `op` (an exact integer).
int64_t reduce_input(const CheckSpec& spec, int rank, size_t index);
// A value any collective can move (broadcast data): a small integer the type stores exactly.
int64_t plain_input(cclDataType_t type, int rank, size_t index, uint64_t seed);

// Stores the integer v (or the ratio num/den, rounded as described above) into element `index`.
void store_value(cclDataType_t type, void* buf, size_t index, int64_t v);
void store_ratio(cclDataType_t type, void* buf, size_t index, int64_t num, int64_t den);

// Elements [first, first + count) of one rank's input, of the reduced result, or of the plain
// data of `rank`, written to buf[0, count): `first` picks one rank's block of a longer vector
// (reducescatter's result, alltoall's pieces).
void fill_reduce_input(void* buf, size_t count, const CheckSpec& spec, int rank);
void fill_reduce_expected(void* buf, size_t count, const CheckSpec& spec, size_t first = 0);
void fill_plain(void* buf, size_t count, cclDataType_t type, int rank, uint64_t seed,
                size_t first = 0);

// Elements of `got` that differ from `expected`.
int64_t count_wrong(const void* got, const void* expected, size_t count, cclDataType_t type);

struct CheckBuffers {
  void* send;      // at least geometry.send_count elements
  void* recv;      // at least geometry.recv_count elements (and the in-place send region)
  void* expected;  // at least geometry.recv_count elements
};

// Prepares one checked operation on `rank`, as nccl-tests' InitData does: zeroes the receive
// buffer, writes the input (into the send buffer, or into the receive buffer for an in-place
// run) and writes what the receive buffer must hold afterwards. A non-root of reduce must find
// its receive buffer as it was (the library may not write a buffer the rank does not use).
void prepare_check(const CheckSpec& spec, int rank, const Geometry& g, bool in_place,
                   const CheckBuffers& buffers);

// Whether the in-place run of `coll` is checked. nccl-tests leaves alltoall and sendrecv
// unchecked in place (their "#wrong" is N/A): NCCL does not define a send and a receive of one
// group sharing a buffer.
bool checked_in_place(Collective coll);

// Where the operation reads and writes, relative to the buffers (nccl-tests' in-place layout).
void* op_send_ptr(const CheckSpec& spec, int rank, const Geometry& g, bool in_place, void* send,
                  void* recv);
void* op_recv_ptr(const CheckSpec& spec, int rank, const Geometry& g, bool in_place, void* recv);

}  // namespace ccl::perf
