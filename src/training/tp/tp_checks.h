// The argument checks the tensor-parallel pieces share: each throws ccl::Error with
// cclInvalidArgument and a message that names the function and the argument.
#pragma once

#include <cstddef>
#include <string>

#include "ccl/training/tensor_parallel.hpp"

namespace ccl::training::tp_detail {

[[noreturn]] void invalid(const char* where, const std::string& what);

// m.data.size() == m.rows * m.cols.
void check_matrix(const char* where, const char* name, ConstMatrix m);
// check_matrix, and m is exactly [rows, cols].
void check_shape(const char* where, const char* name, ConstMatrix m, std::size_t rows,
                 std::size_t cols);
// `parts` divides `value` (an even split): "<name> <value> is not a multiple of tp <parts>".
void check_divides(const char* where, const char* name, std::size_t value, int parts);

}  // namespace ccl::training::tp_detail
