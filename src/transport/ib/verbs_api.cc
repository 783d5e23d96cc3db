#include "transport/ib/verbs_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "base/config.h"
#include "base/error.h"

namespace ccl::transport::ib {
namespace {

std::atomic<const VerbsApi*> g_installed{nullptr};

// The library's own ibv_query_port (the compatibility entry point), for providers without an
// extended context; the first library loaded provides it (a process loads one in practice).
using CompatQueryPort = int (*)(ibv_context*, uint8_t, _compat_ibv_port_attr*);
std::atomic<CompatQueryPort> g_compat_query_port{nullptr};

// The inlines of verbs.h: they only follow the context's ops, so libccl needs no symbol of
// libibverbs for them.
int real_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return ibv_post_send(qp, wr, bad);
}
int real_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return ibv_post_recv(qp, wr, bad);
}
int real_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); }
int real_req_notify_cq(ibv_cq* cq, int solicited_only) {
  return ibv_req_notify_cq(cq, solicited_only);
}
int real_query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) {
  verbs_context* vctx = verbs_get_ctx_op(context, query_port);
  if (vctx != nullptr) return vctx->query_port(context, port, attr, sizeof(*attr));
  std::memset(attr, 0, sizeof(*attr));
  CompatQueryPort compat = g_compat_query_port.load();
  if (compat == nullptr) return EOPNOTSUPP;
  return compat(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

struct Loaded {
  std::unique_ptr<VerbsApi> api;  // nullptr: `error` says why
  std::string error;
};

template <class F>
bool resolve(void* handle, const char* symbol, F* out, std::string* error) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (p == nullptr) {
    const char* why = dlerror();
    *error = why != nullptr ? why : std::string(symbol) + ": symbol not found";
    return false;
  }
  *out = reinterpret_cast<F>(p);
  return true;
}

Loaded load(const std::string& library) {
  Loaded result;
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    result.error = why != nullptr ? why : library + ": cannot be loaded";
    return result;
  }
  auto api = std::make_unique<VerbsApi>();
  CompatQueryPort compat = nullptr;
  std::string& e = result.error;
  bool ok = resolve(handle, "ibv_get_device_list", &api->get_device_list, &e) &&
            resolve(handle, "ibv_free_device_list", &api->free_device_list, &e) &&
            resolve(handle, "ibv_get_device_name", &api->get_device_name, &e) &&
            resolve(handle, "ibv_open_device", &api->open_device, &e) &&
            resolve(handle, "ibv_close_device", &api->close_device, &e) &&
            resolve(handle, "ibv_query_device", &api->query_device, &e) &&
            resolve(handle, "ibv_query_port", &compat, &e) &&
            resolve(handle, "ibv_query_gid", &api->query_gid, &e) &&
            resolve(handle, "ibv_alloc_pd", &api->alloc_pd, &e) &&
            resolve(handle, "ibv_dealloc_pd", &api->dealloc_pd, &e) &&
            resolve(handle, "ibv_reg_mr", &api->reg_mr, &e) &&
            resolve(handle, "ibv_dereg_mr", &api->dereg_mr, &e) &&
            resolve(handle, "ibv_create_comp_channel", &api->create_comp_channel, &e) &&
            resolve(handle, "ibv_destroy_comp_channel", &api->destroy_comp_channel, &e) &&
            resolve(handle, "ibv_create_cq", &api->create_cq, &e) &&
            resolve(handle, "ibv_destroy_cq", &api->destroy_cq, &e) &&
            resolve(handle, "ibv_get_cq_event", &api->get_cq_event, &e) &&
            resolve(handle, "ibv_ack_cq_events", &api->ack_cq_events, &e) &&
            resolve(handle, "ibv_create_qp", &api->create_qp, &e) &&
            resolve(handle, "ibv_modify_qp", &api->modify_qp, &e) &&
            resolve(handle, "ibv_destroy_qp", &api->destroy_qp, &e);
  if (!ok) {
    e = library + ": " + e;
    dlclose(handle);
    return result;
  }
  // Optional: a library without it registers no device memory.
  api->reg_dmabuf_mr =
      reinterpret_cast<decltype(api->reg_dmabuf_mr)>(dlsym(handle, "ibv_reg_dmabuf_mr"));
  CompatQueryPort none = nullptr;
  g_compat_query_port.compare_exchange_strong(none, compat);
  api->query_port = real_query_port;
  api->post_send = real_post_send;
  api->post_recv = real_post_recv;
  api->poll_cq = real_poll_cq;
  api->req_notify_cq = real_req_notify_cq;
  result.api = std::move(api);
  return result;
}

}  // namespace

const VerbsApi* verbs_api(std::string* why) {
  if (const VerbsApi* installed = g_installed.load(std::memory_order_acquire)) return installed;
  // One attempt per library name: CCL_IB_LIBRARY is read at each call, so tests may point it
  // elsewhere, but a library is never opened twice.
  static std::mutex mutex;
  static std::map<std::string, Loaded> loaded;
  const std::string library = config_string("CCL_IB_LIBRARY");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(library);
  if (it == loaded.end()) it = loaded.emplace(library, load(library)).first;
  if (it->second.api == nullptr && why != nullptr) *why = it->second.error;
  return it->second.api.get();
}

const VerbsApi& verbs_api_or_throw() {
  std::string why;
  const VerbsApi* api = verbs_api(&why);
  if (api == nullptr) throw_error(cclSystemError, "ib: %s", why.c_str());
  return *api;
}

void install_verbs_api_for_tests(const VerbsApi* api) {
  g_installed.store(api, std::memory_order_release);
}

std::string wc_status_text(int status) {
  struct Known {
    int status;
    const char* text;
  };
  static constexpr Known kKnown[] = {
      {IBV_WC_SUCCESS, "IBV_WC_SUCCESS: success"},
      {IBV_WC_LOC_LEN_ERR, "IBV_WC_LOC_LEN_ERR: local length error"},
      {IBV_WC_LOC_QP_OP_ERR, "IBV_WC_LOC_QP_OP_ERR: local QP operation error"},
      {IBV_WC_LOC_PROT_ERR, "IBV_WC_LOC_PROT_ERR: local protection error"},
      {IBV_WC_WR_FLUSH_ERR, "IBV_WC_WR_FLUSH_ERR: work request flushed (the QP is in error)"},
      {IBV_WC_MW_BIND_ERR, "IBV_WC_MW_BIND_ERR: memory window bind error"},
      {IBV_WC_BAD_RESP_ERR, "IBV_WC_BAD_RESP_ERR: bad response"},
      {IBV_WC_LOC_ACCESS_ERR, "IBV_WC_LOC_ACCESS_ERR: local access error"},
      {IBV_WC_REM_INV_REQ_ERR, "IBV_WC_REM_INV_REQ_ERR: remote invalid request"},
      {IBV_WC_REM_ACCESS_ERR, "IBV_WC_REM_ACCESS_ERR: remote access error (key or bounds)"},
      {IBV_WC_REM_OP_ERR, "IBV_WC_REM_OP_ERR: remote operation error"},
      {IBV_WC_RETRY_EXC_ERR,
       "IBV_WC_RETRY_EXC_ERR: transport retry counter exceeded (the peer is gone or unreachable)"},
      {IBV_WC_RNR_RETRY_EXC_ERR, "IBV_WC_RNR_RETRY_EXC_ERR: receiver-not-ready retries exceeded"},
      {IBV_WC_REM_ABORT_ERR, "IBV_WC_REM_ABORT_ERR: remote aborted"},
      {IBV_WC_FATAL_ERR, "IBV_WC_FATAL_ERR: fatal error"},
      {IBV_WC_RESP_TIMEOUT_ERR, "IBV_WC_RESP_TIMEOUT_ERR: response timeout"},
      {IBV_WC_GENERAL_ERR, "IBV_WC_GENERAL_ERR: general error"},
  };
  for (const Known& k : kKnown) {
    if (k.status == status) return k.text;
  }
  return "work completion status " + std::to_string(status);
}

}  // namespace ccl::transport::ib
