// What a torch.distributed call hands the backend, checked and turned into ccl's terms: the
// datatype of a tensor, the reduction of a ReduceOp, and the contiguous CPU buffers ccl reads and
// writes. Every refusal is a c10::Error (RuntimeError in Python) that names the operation and the
// reason, before anything is sent.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <utility>
#include <vector>

#include "ccl/ccl.h"

namespace ccl_torch {

// ccl's datatype for a tensor's dtype: float16, bfloat16, float32, float64, int8, uint8, int32,
// int64; bool travels as uint8. Anything else is refused.
cclDataType_t datatype_of(const char* op, const at::Tensor& tensor);

// One dense (strided) tensor on the CPU or a CUDA device, else refused: a sparse one, or one of
// another device.
void check_tensor(const char* op, const at::Tensor& tensor);

// The single tensor a CPU collective takes (torch passes lists for the multi-device API).
const at::Tensor& single_tensor(const char* op, const std::vector<at::Tensor>& tensors);

// Every tensor of `tensors` has the dtype and the number of elements of `like`.
void check_same_shape(const char* op, const std::vector<at::Tensor>& tensors,
                      const at::Tensor& like);

// A reduction in ccl's terms. PREMUL_SUM needs a per-communicator op, created by the caller from
// `premul_factor` (a one-element tensor of the data's dtype).
struct Reduction {
  cclRedOp_t op = cclSum;
  bool premul = false;
  at::Tensor premul_factor;
};
// SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM; bool tensors reduce as logical or (SUM, MAX) and
// logical and (PRODUCT, MIN), as ProcessGroupNCCL does. BAND, BOR, BXOR are refused.
Reduction reduction_of(const char* op, const c10d::ReduceOp& reduce_op, const at::Tensor& data);

// A tensor ccl may read or write in place: the tensor itself when it is contiguous, else a
// contiguous copy that `copy_back` returns to it once the operation is done.
struct Staged {
  at::Tensor buffer;                                         // what ccl sees
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (user tensor, buffer) pairs
};
Staged stage_inout(const at::Tensor& tensor);

std::string describe(const at::Tensor& tensor);
std::string dtype_name(at::ScalarType type);  // Python's spelling: "torch.int16"  // "float32[4, 3]
                                              // (cpu)" for messages

}  // namespace ccl_torch
