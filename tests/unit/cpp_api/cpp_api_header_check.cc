// ccl.hpp must compile on its own (it is first here) and stay clean under stricter warnings than
// the project's (see CMakeLists.txt). Every template is instantiated, on an empty communicator,
// where each operation must throw ccl::Error rather than crash.
#include "ccl/ccl.hpp"
// (nothing before ccl.hpp)
#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace {

template <class T>
void every_operation(ccl::Communicator& comm, ccl::Stream& stream) {
  std::vector<T> a(4), b(4);
  const std::vector<T>& in = a;
  std::vector<size_t> counts(1, 4), displs(1, 0);
  EXPECT_THROW(comm.all_reduce(in, b), ccl::Error);
  EXPECT_THROW(comm.all_reduce(a, cclMax, stream), ccl::Error);
  EXPECT_THROW(comm.broadcast(in, b, 0, &stream), ccl::Error);
  EXPECT_THROW(comm.broadcast(a, 0), ccl::Error);
  EXPECT_THROW(comm.reduce(in, b, cclSum, 0), ccl::Error);
  EXPECT_THROW(comm.reduce(a, cclMin, 0, nullptr), ccl::Error);
  EXPECT_THROW(comm.all_gather(std::span<const T>(a).first(1), b), ccl::Error);
  EXPECT_THROW(comm.all_gather(a), ccl::Error);
  EXPECT_THROW(comm.reduce_scatter(in, std::span<T>(b).first(1)), ccl::Error);
  EXPECT_THROW((void)comm.reduce_scatter(a, cclSum, stream), ccl::Error);
  EXPECT_THROW(comm.all_to_all(in, b), ccl::Error);
  EXPECT_THROW(comm.all_gather_v(in, b, counts, displs), ccl::Error);
  EXPECT_THROW(comm.all_to_all_v(in, counts, displs, b, counts, displs), ccl::Error);
  EXPECT_THROW(comm.send(in, 0), ccl::Error);
  EXPECT_THROW(comm.recv(b, 0, stream), ccl::Error);
  EXPECT_THROW(ccl::make_premul_sum(comm, T{}), ccl::Error);
}

TEST(CppApiHeader, EveryOperationOnAnEmptyCommunicatorThrows) {
  ccl::Communicator comm;
  ccl::Stream stream;
  every_operation<int8_t>(comm, stream);
  every_operation<char>(comm, stream);
  every_operation<uint8_t>(comm, stream);
  every_operation<int32_t>(comm, stream);
  every_operation<uint32_t>(comm, stream);
  every_operation<int64_t>(comm, stream);
  every_operation<uint64_t>(comm, stream);
  every_operation<float>(comm, stream);
  every_operation<double>(comm, stream);
  every_operation<ccl::half>(comm, stream);
  every_operation<ccl::bfloat16>(comm, stream);
  every_operation<ccl::fp8_e4m3>(comm, stream);
  every_operation<ccl::fp8_e5m2>(comm, stream);
  EXPECT_THROW(comm.barrier(), ccl::Error);
  EXPECT_THROW(comm.finalize(), ccl::Error);
  EXPECT_THROW((void)comm.split(0, 0), ccl::Error);
  EXPECT_THROW((void)comm.async_error(), ccl::Error);
  EXPECT_EQ(comm.last_error(), "");
  stream.synchronize();  // nothing was queued: every call failed before queueing
}

}  // namespace
