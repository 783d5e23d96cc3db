// The C++ version of allreduce.c, through ccl/ccl.hpp: errors arrive as ccl::Error.
//
//   cclrun -np 2 ./allreduce_cpp      ->  "rank 0 of 2: allreduce ok (3 6 9 12)"
#include <ccl/ccl.hpp>
#include <cstdio>
#include <span>
#include <vector>

int main() {
  try {
    ccl::Communicator comm = ccl::Communicator::from_env();
    const int rank = comm.rank();
    const int size = comm.size();

    std::vector<float> v = {1, 2, 3, 4};
    for (float& x : v) x *= static_cast<float>(rank + 1);
    comm.all_reduce(std::span<float>(v));  // in place, sum; returns when v holds the result

    // The sum of (r + 1) over the ranks is size * (size + 1) / 2; small integers are exact.
    const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
    bool ok = true;
    for (size_t i = 0; i < v.size(); ++i) ok = ok && v[i] == ranks_sum * static_cast<float>(i + 1);
    std::printf("rank %d of %d: allreduce %s (%g %g %g %g)\n", rank, size, ok ? "ok" : "WRONG",
                v[0], v[1], v[2], v[3]);
    return ok ? 0 : 1;
  } catch (const ccl::Error& e) {
    std::fprintf(stderr, "ccl error %d: %s\n", static_cast<int>(e.code()), e.what());
    return 1;
  }
}
