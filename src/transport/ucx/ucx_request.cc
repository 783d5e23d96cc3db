#include "transport/ucx/ucx_request.h"

namespace ccl::transport::ucx {

void PendingOp::reset(ucs_status_ptr_t result) {
  release();
  if (UCS_PTR_IS_PTR(result)) {
    request_ = result;
    status_ = UCS_INPROGRESS;
  } else {
    status_ = UCS_PTR_STATUS(result);  // UCS_OK (done at once) or an error
  }
}

bool PendingOp::done() {
  if (request_ != nullptr && status_ == UCS_INPROGRESS)
    status_ = ucp_request_check_status(request_);
  return status_ != UCS_INPROGRESS && status_ != kIdle;
}

bool PendingOp::done_recv() {
  if (request_ != nullptr && status_ == UCS_INPROGRESS) {
    status_ = ucp_tag_recv_request_test(request_, &info_);
  }
  return status_ != UCS_INPROGRESS && status_ != kIdle;
}

void PendingOp::cancel(ucp_worker_h worker) {
  if (!in_flight()) return;
  ucp_request_cancel(worker, request_);
  status_ = ucp_request_check_status(request_);
}

void PendingOp::release() {
  if (request_ != nullptr) ucp_request_free(request_);
  request_ = nullptr;
  status_ = kIdle;
}

}  // namespace ccl::transport::ucx
