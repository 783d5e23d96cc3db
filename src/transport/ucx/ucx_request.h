// One UCX operation in flight, polled rather than called back: what a ucp_*_nbx call returned
// (an immediate status, or a request handle that the owner tests and finally frees).
//
// No completion callbacks are registered anywhere, so UCX never calls into an object that may be
// gone; a request handle stays valid until release() frees it, whether it completed or not.
#pragma once

#include <ucp/api/ucp.h>

#include <utility>

namespace ccl::transport::ucx {

class PendingOp {
 public:
  PendingOp() = default;
  // The result of a ucp_*_nbx call.
  explicit PendingOp(ucs_status_ptr_t result) { reset(result); }
  PendingOp(PendingOp&& other) noexcept { *this = std::move(other); }
  PendingOp& operator=(PendingOp&& other) noexcept {
    if (this != &other) {
      release();
      request_ = std::exchange(other.request_, nullptr);
      status_ = std::exchange(other.status_, kIdle);
      info_ = other.info_;
    }
    return *this;
  }
  PendingOp(const PendingOp&) = delete;
  PendingOp& operator=(const PendingOp&) = delete;
  ~PendingOp() { release(); }

  void reset(ucs_status_ptr_t result);
  // A completed tag receive's sender tag and length (done_recv() fills it).
  const ucp_tag_recv_info_t& received() const { return info_; }

  // True once posted (and not released).
  bool active() const { return request_ != nullptr || status_ != kIdle; }
  // Tests the request without progressing the worker; true once complete (status() final).
  bool done();
  bool done_recv();  // the same for a tag receive, which also fills received()
  ucs_status_t status() const { return status_; }
  bool in_flight() const { return request_ != nullptr && status_ == UCS_INPROGRESS; }

  // ucp_request_cancel (tag receives only), then tests it.
  void cancel(ucp_worker_h worker);
  // Frees the request handle; UCX finishes an incomplete one on its own.
  void release();

 private:
  static constexpr ucs_status_t kIdle = UCS_ERR_LAST;  // nothing posted
  void* request_ = nullptr;
  ucs_status_t status_ = kIdle;
  ucp_tag_recv_info_t info_{};
};

// Parameters of a polled operation: no callback, contiguous bytes.
inline ucp_request_param_t polled_param() { return ucp_request_param_t{}; }

// A tag receive always gets a request (UCP_OP_ATTR_FLAG_NO_IMM_CMPL): UCX 1.13 completes a receive
// whose eager message is already there at once and, although asked to
// (UCP_OP_ATTR_FIELD_RECV_INFO), leaves the sender tag and length unset; ucp_tag_recv_request_test
// reports them.
inline ucp_request_param_t polled_recv_param() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  return param;
}

}  // namespace ccl::transport::ucx
