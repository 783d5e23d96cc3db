#include "tensor_args.h"

#include <c10/util/Exception.h>

#include <sstream>

namespace ccl_torch {

std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kHalf:
      return "torch.float16";
    case at::kBFloat16:
      return "torch.bfloat16";
    case at::kFloat:
      return "torch.float32";
    case at::kDouble:
      return "torch.float64";
    case at::kChar:
      return "torch.int8";
    case at::kByte:
      return "torch.uint8";
    case at::kShort:
      return "torch.int16";
    case at::kInt:
      return "torch.int32";
    case at::kLong:
      return "torch.int64";
    case at::kBool:
      return "torch.bool";
    case at::kComplexHalf:
      return "torch.complex32";
    case at::kComplexFloat:
      return "torch.complex64";
    case at::kComplexDouble:
      return "torch.complex128";
    default:
      return std::string("torch.") + c10::toString(type);
  }
}

std::string describe(const at::Tensor& tensor) {
  std::ostringstream out;
  out << dtype_name(tensor.scalar_type()) << tensor.sizes() << " (" << tensor.device()
      << (tensor.is_sparse() ? ", sparse" : "") << ")";
  return out.str();
}

void check_tensor(const char* op, const at::Tensor& tensor) {
  TORCH_CHECK(tensor.defined(), "ccl ", op, ": an undefined tensor");
  TORCH_CHECK(!tensor.is_sparse(), "ccl ", op, ": sparse tensors are not supported (",
              describe(tensor), "); pass a dense tensor (tensor.to_dense())");
  TORCH_CHECK((tensor.device().is_cpu() || tensor.is_cuda()) && tensor.layout() == c10::kStrided,
              "ccl ", op, ": only dense CPU and CUDA tensors are supported, not ",
              describe(tensor));
}

cclDataType_t datatype_of(const char* op, const at::Tensor& tensor) {
  check_tensor(op, tensor);
  switch (tensor.scalar_type()) {
    case at::kHalf:
      return cclFloat16;
    case at::kBFloat16:
      return cclBfloat16;
    case at::kFloat:
      return cclFloat32;
    case at::kDouble:
      return cclFloat64;
    case at::kChar:
      return cclInt8;
    case at::kByte:
      return cclUint8;
    case at::kBool:
      return cclUint8;
    case at::kInt:
      return cclInt32;
    case at::kLong:
      return cclInt64;
    default:
      TORCH_CHECK(false, "ccl ", op, ": dtype ", dtype_name(tensor.scalar_type()),
                  " is not supported (float16, bfloat16, float32, float64, int8, uint8, int32, "
                  "int64 and bool are)");
  }
}

const at::Tensor& single_tensor(const char* op, const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(tensors.size() == 1, "ccl ", op, ": takes one tensor per process, got ",
              tensors.size());
  check_tensor(op, tensors[0]);
  return tensors[0];
}

void check_same_shape(const char* op, const std::vector<at::Tensor>& tensors,
                      const at::Tensor& like) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(op, tensors[i]);
    TORCH_CHECK(tensors[i].scalar_type() == like.scalar_type(), "ccl ", op, ": tensor ", i, " is ",
                describe(tensors[i]), " but the input is ", describe(like));
    TORCH_CHECK(tensors[i].numel() == like.numel(), "ccl ", op, ": tensor ", i, " has ",
                tensors[i].numel(), " elements but the input has ", like.numel());
  }
}

Reduction reduction_of(const char* op, const c10d::ReduceOp& reduce_op, const at::Tensor& data) {
  const bool is_bool = data.scalar_type() == at::kBool;
  Reduction r;
  switch (reduce_op.op_) {
    case c10d::ReduceOp::SUM:
      r.op = is_bool ? cclMax : cclSum;
      break;
    case c10d::ReduceOp::PRODUCT:
      r.op = is_bool ? cclMin : cclProd;
      break;
    case c10d::ReduceOp::MIN:
      r.op = cclMin;
      break;
    case c10d::ReduceOp::MAX:
      r.op = cclMax;
      break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!is_bool, "ccl ", op, ": ReduceOp.AVG of a bool tensor has no meaning");
      r.op = cclAvg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(!is_bool, "ccl ", op, ": PREMUL_SUM of a bool tensor has no meaning");
      // torch passes the factor as a number or a one-element tensor (on this rank's device); the
      // supplement's older name is the one every torch from 2.9 has.
      auto* supplement = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(reduce_op.supplement_.get());
      TORCH_CHECK_VALUE(supplement != nullptr, "ccl ", op, ": PREMUL_SUM without its factor");
      if (supplement->tensor_factor.defined()) {
        const at::Tensor& f = supplement->tensor_factor;
        check_tensor(op, f);
        TORCH_CHECK_VALUE(f.numel() == 1, "ccl ", op,
                          ": the PREMUL_SUM factor must have one element, ", describe(f), " has ",
                          f.numel());
        // On the host: ccl reads the factor there (a CUDA factor is copied, a device sync).
        r.premul_factor = f.to(at::kCPU, data.scalar_type()).contiguous().clone();
      } else {
        r.premul_factor = at::scalar_tensor(supplement->double_factor,
                                            at::TensorOptions().dtype(data.scalar_type()));
      }
      r.premul = true;
      r.op = cclSum;
      break;
    }
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false, "ccl ", op,
                  ": bitwise reductions (BAND, BOR, BXOR) are not supported; ccl reduces with "
                  "SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM");
    default:
      TORCH_CHECK(false, "ccl ", op, ": unknown ReduceOp ", static_cast<int>(reduce_op.op_));
  }
  return r;
}

Staged stage_inout(const at::Tensor& tensor) {
  Staged s;
  if (tensor.is_contiguous()) {
    s.buffer = tensor;
  } else {
    s.buffer = tensor.contiguous();
    s.copy_back.emplace_back(tensor, s.buffer);
  }
  return s;
}

}  // namespace ccl_torch
