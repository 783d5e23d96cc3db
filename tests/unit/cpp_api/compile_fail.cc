// Not built: CMakeLists.txt runs the compiler on it and expects the static_assert named by
// CCL_FAIL_CASE to fire with its message.
#include <vector>

#include "ccl/ccl.hpp"

void should_not_compile(ccl::Communicator& comm) {
#if CCL_FAIL_CASE == 1
  std::vector<long double> unsupported(4);  // no cclDataType_t
  comm.all_reduce(unsupported);
#elif CCL_FAIL_CASE == 2
  std::vector<float> send(4);
  std::vector<double> recv(4);  // not the element type of send
  comm.all_reduce(send, recv);
#endif
}
