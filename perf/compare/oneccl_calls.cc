// The collectives of mpi_coll_bench.c through Intel's oneCCL (its C++ API), for perf/compare: the
// harness (sizes, timing, table) stays mpi_coll_bench.c's, built with -DCOLL_BENCH_ONECCL and
// linked with this file, oneCCL's libccl and Intel MPI's libmpi (oneCCL's own launcher and
// transport; scripts/install-perf-peers.sh installs both). MPI starts the ranks and carries
// oneCCL's rendezvous address from rank 0 (its key-value store) to the others, as oneCCL's own
// examples do; every timed call is oneCCL's, waited for (blocking, as MPI's).
//
// In place as nccl-tests defines it: allreduce and broadcast on one buffer, allgather's input is
// the rank's piece of the output, reducescatter's output is the rank's piece of the input;
// alltoall has no in-place form in oneCCL, so its in-place column runs out of place too.
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <oneapi/ccl.hpp>
#include <optional>

namespace {

std::optional<ccl::communicator> g_comm;

}  // namespace

extern "C" {

// 0 once every rank has joined oneCCL's communicator; else nonzero, having printed why.
int oneccl_setup(int rank, int nranks, char* name, size_t name_size) {
  try {
    ccl::init();
    ccl::shared_ptr_class<ccl::kvs> kvs;
    ccl::kvs::address_type address{};
    if (rank == 0) {
      kvs = ccl::create_main_kvs();
      address = kvs->get_address();
    }
    MPI_Bcast(address.data(), static_cast<int>(address.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0) kvs = ccl::create_kvs(address);
    g_comm.emplace(ccl::create_communicator(nranks, rank, kvs));
    const ccl::library_version v = ccl::get_library_version();
    std::snprintf(name, name_size, "Intel oneCCL %d.%d.%d (%s)", v.major, v.minor, v.update,
                  v.full != nullptr ? v.full : "");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "oneccl_setup: rank %d: %s\n", rank, e.what());
    return 1;
  }
}

// One call of `collective` (mpi_coll_bench.c's enum order: allreduce, broadcast, allgather,
// reducescatter, alltoall) on floats, waited for. `count` is the per-rank piece for the
// collectives with pieces, as MPI's calls take it.
void oneccl_run(int collective, char* send, char* recv, size_t count, int root, int rank,
                int in_place) {
  const ccl::communicator& comm = *g_comm;
  const auto f32 = ccl::datatype::float32;
  const size_t piece = count * sizeof(float);
  switch (collective) {
    case 1:
      ccl::broadcast(recv, count, f32, root, comm).wait();
      return;
    case 2:
      ccl::allgather(in_place != 0 ? recv + rank * piece : send, recv, count, f32, comm).wait();
      return;
    case 3:
      ccl::reduce_scatter(send, in_place != 0 ? send + rank * piece : recv, count, f32,
                          ccl::reduction::sum, comm)
          .wait();
      return;
    case 4:
      ccl::alltoall(send, recv, count, f32, comm).wait();
      return;
    default:
      ccl::allreduce(in_place != 0 ? recv : send, recv, count, f32, ccl::reduction::sum, comm)
          .wait();
  }
}

void oneccl_teardown(void) { g_comm.reset(); }

}  // extern "C"
