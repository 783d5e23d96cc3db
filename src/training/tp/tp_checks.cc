// Shape checks of the tensor-parallel layer, all throwing ccl::Error(cclInvalidArgument).
#include "tp/tp_checks.h"

namespace ccl::training::tp_detail {

void invalid(const char* where, const std::string& what) {
  throw Error(cclInvalidArgument, std::string("ccl::training::") + where + ": " + what);
}

void check_matrix(const char* where, const char* name, ConstMatrix m) {
  if (m.data.size() != m.rows * m.cols) {
    invalid(where, std::string(name) + " has " + std::to_string(m.data.size()) +
                       " elements, not rows " + std::to_string(m.rows) + " * cols " +
                       std::to_string(m.cols));
  }
}

void check_shape(const char* where, const char* name, ConstMatrix m, std::size_t rows,
                 std::size_t cols) {
  check_matrix(where, name, m);
  if (m.rows != rows || m.cols != cols) {
    invalid(where, std::string(name) + " is [" + std::to_string(m.rows) + ", " +
                       std::to_string(m.cols) + "], expected [" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "]");
  }
}

void check_divides(const char* where, const char* name, std::size_t value, int parts) {
  if (parts < 1 || value % static_cast<std::size_t>(parts) != 0) {
    invalid(where, std::string(name) + " " + std::to_string(value) + " is not a multiple of tp " +
                       std::to_string(parts) + " (only even splits are supported)");
  }
}

}  // namespace ccl::training::tp_detail
