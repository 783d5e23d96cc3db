#include "core/call/reduction_ops.h"

#include <cstring>

#include "base/error.h"
#include "cuda/cuda_memory.h"

namespace ccl {

namespace {

bool is_builtin(cclRedOp_t op) {
  return static_cast<int>(op) >= 0 && static_cast<int>(op) < cclNumOps;
}

}  // namespace

cclRedOp_t ReductionOps::create_premul_sum(const void* scalar, cclDataType_t type, int residence) {
  const char* fn = "cclRedOpCreatePreMulSum";
  if (scalar == nullptr) throw_error(cclInvalidArgument, "%s: scalar is NULL", fn);
  if (reduce::scale_kernel(type) == nullptr) {
    throw_error(cclInvalidArgument, "%s: datatype %d is not a valid cclDataType_t", fn,
                static_cast<int>(type));
  }
  if (residence != 0 && residence != 1) {
    throw_error(cclInvalidArgument,
                "%s: residence %d must be 0 (scalar read now) or 1 (scalar "
                "read at each operation)",
                fn, residence);
  }
  // The scalar is read on the host (at creation or at each operation), never by a kernel: a
  // device-resident scalar (NCCL's ncclScalarDevice on device memory) would be a host read of
  // device memory.
  if (cuda::pointer_kind(scalar) == MemoryKind::CudaDevice) {
    throw_error(cclInvalidUsage,
                "%s: scalar %p is CUDA device memory; ccl reads the scalar on the host: pass it in "
                "host memory",
                fn, scalar);
  }
  PreMulSum entry;
  entry.live = true;
  entry.type = type;
  if (residence == 1) {
    entry.pointer = scalar;
  } else {
    std::memcpy(entry.value.data(), scalar, reduce::datatype_size(type));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  size_t index = 0;
  while (index < ops_.size() && ops_[index].live) ++index;
  if (index == ops_.size()) {
    if (ops_.size() >= 1u << 20) throw_error(cclInvalidUsage, "%s: too many live operations", fn);
    ops_.emplace_back();
  }
  ops_[index] = entry;
  return static_cast<cclRedOp_t>(cclNumOps + static_cast<int>(index));
}

const ReductionOps::PreMulSum* ReductionOps::find(cclRedOp_t op) const {
  const int index = static_cast<int>(op) - cclNumOps;
  if (index < 0 || static_cast<size_t>(index) >= ops_.size() || !ops_[index].live) return nullptr;
  return &ops_[index];
}

void ReductionOps::destroy(cclRedOp_t op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (is_builtin(op)) {
    throw_error(cclInvalidArgument, "cclRedOpDestroy: op %d is a built-in operation",
                static_cast<int>(op));
  }
  const PreMulSum* entry = find(op);
  if (entry == nullptr) {
    throw_error(cclInvalidArgument,
                "cclRedOpDestroy: op %d was not made by cclRedOpCreatePreMulSum on this "
                "communicator, or was destroyed already",
                static_cast<int>(op));
  }
  ops_[static_cast<int>(op) - cclNumOps].live = false;
}

void ReductionOps::check(cclRedOp_t op, cclDataType_t type, const char* function) const {
  if (is_builtin(op)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const PreMulSum* entry = find(op);
  if (entry == nullptr) {
    throw_error(cclInvalidArgument,
                "%s: op %d is neither a built-in operation (0..%d) nor a live PreMulSum op of "
                "this communicator",
                function, static_cast<int>(op), cclNumOps - 1);
  }
  if (entry->type != type) {
    throw_error(cclInvalidArgument, "%s: op %d was created for datatype %d, not for datatype %d",
                function, static_cast<int>(op), static_cast<int>(entry->type),
                static_cast<int>(type));
  }
}

Reduction ReductionOps::resolve(cclRedOp_t op, cclDataType_t type, int nranks) const {
  Reduction r;
  if (is_builtin(op)) {
    r.exec = algo::reduction_op(type, op, nranks);
    return r;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const PreMulSum* entry = find(op);
  if (entry == nullptr || entry->type != type) {
    throw_error(cclInvalidArgument, "op %d is not a live PreMulSum op for this datatype",
                static_cast<int>(op));
  }
  r.exec = algo::reduction_op(type, cclSum, nranks);
  r.scale = reduce::scale_kernel(type);
  const size_t size = reduce::datatype_size(type);
  std::memcpy(r.scalar.data(), entry->pointer != nullptr ? entry->pointer : entry->value.data(),
              size);
  return r;
}

}  // namespace ccl
