// Every verbs call the ib transport makes goes through one table of function pointers, so that
// libccl never links libibverbs (it loads CCL_IB_LIBRARY at run time: a host without RDMA runs
// ccl all the same and is told why ib is unavailable) and so that the unit tests run the whole
// transport against an in-process mock provider (tests/unit/transport_ib/mock_verbs.h).
//
// post_send, post_recv, poll_cq and req_notify_cq are static inlines of verbs.h dispatching
// through the context's ops: the real table wraps those inlines, a mock implements them itself.
// query_port is the same: the real table goes through verbs.h's extended-context inline.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace ccl::transport::ib {

struct VerbsApi {
  ibv_device** (*get_device_list)(int* num_devices);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  int (*query_device)(ibv_context* context, ibv_device_attr* attr);
  int (*query_port)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access);
  // GPUDirect RDMA: device memory exported as a dmabuf (rdma-core 34 and later). nullptr where
  // the library lacks it: then device memory is not registered (it is staged through host
  // memory).
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access);
  int (*dereg_mr)(ibv_mr* mr);
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context);
  int (*destroy_comp_channel)(ibv_comp_channel* channel);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector);
  int (*destroy_cq)(ibv_cq* cq);
  int (*req_notify_cq)(ibv_cq* cq, int solicited_only);
  int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context);
  void (*ack_cq_events)(ibv_cq* cq, unsigned int count);
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
  int (*destroy_qp)(ibv_qp* qp);
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
  int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc);
};

// The table to use: the one installed for tests if any, else the real one, loading
// config_string("CCL_IB_LIBRARY") on first use of each library name (thread-safe; a library is
// opened once per process and never closed). nullptr when the library or one of its symbols is
// missing; then *why (if given) says so in dlerror()'s words.
const VerbsApi* verbs_api(std::string* why = nullptr);

// The same, throwing SystemError ("ib: <why>") when no table is available.
const VerbsApi& verbs_api_or_throw();

// Installs `api` in place of the real table (nullptr restores it). For tests: not synchronized
// with transports in use, so install it before making any and remove it after destroying them.
void install_verbs_api_for_tests(const VerbsApi* api);

// A work completion's status as its enum name and a few words ("IBV_WC_RETRY_EXC_ERR: transport
// retry counter exceeded"), without asking the library (ibv_wc_status_str).
std::string wc_status_text(int status);

}  // namespace ccl::transport::ib
