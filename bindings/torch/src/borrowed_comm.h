// A ccl::Communicator over a handle a ccl process group owns (BackendCcl._run_exclusive hands
// it to Python as an integer): released, never destroyed, here. For the modules that include no
// torch header (ccl_torch._training).
#pragma once

#include <ccl/ccl.hpp>
#include <cstdint>

namespace ccl_torch {

class BorrowedComm {
 public:
  explicit BorrowedComm(uintptr_t handle) : comm_(reinterpret_cast<cclComm_t>(handle)) {}
  ~BorrowedComm() { (void)comm_.release(); }
  BorrowedComm(const BorrowedComm&) = delete;
  BorrowedComm& operator=(const BorrowedComm&) = delete;
  ccl::Communicator& get() { return comm_; }

 private:
  ccl::Communicator comm_;
};

}  // namespace ccl_torch
