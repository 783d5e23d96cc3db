// Recursive-doubling allreduce, for small messages: log2(p) rounds in which partners exchange
// their whole vector and both reduce, instead of the ring's 2(n-1) rounds of 1/n each. With p the
// largest power of two <= n, the n - p extra ranks first fold their input into a partner (rank
// r + p into rank r) and get the result back at the end.
//
// Every rank ends with the same bits: at each step both partners compute x (op) y from the same
// two operands, and the ops are commutative. Reductions alternate between Scratch (count
// elements) and Output so that a round never reads what it writes, also in place.
#pragma once

#include <cstddef>

#include "algorithms/schedule.h"

namespace ccl::algo {

Schedule recursive_doubling_allreduce(int nranks, int rank, size_t count);

}  // namespace ccl::algo
