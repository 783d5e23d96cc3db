#include "transport/ucx/ucx_worker.h"

#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "base/log.h"

namespace ccl::transport::ucx {
namespace {

// ucp_worker_progress calls per progress(): enough to drain a burst of completions, and a bound
// so that a peer streaming small messages cannot keep one call spinning.
constexpr int kMaxProgressCalls = 256;

// UCX settings ccl changes unless the user set the variable. ucp_config_modify passes keys UCP
// does not know on to the transports' configurations, by their names inside a transport's table
// (TX_SEG_SIZE for UCX_TCP_TX_SEG_SIZE; only tcp has it); UCX warns ("invalid configurations") of
// such a key when no transport took it, so tcp_only keys are set only where tcp may run.
struct UcxDefault {
  const char* variable;
  const char* key;
  const char* value;
  bool tcp_only;
};
constexpr UcxDefault kUcxDefaults[] = {
    // UCX 1.13 checks every 20 s; ccl wants a peer that stopped answering found within a second.
    {"UCX_KEEPALIVE_INTERVAL", "KEEPALIVE_INTERVAL", UcxWorker::kKeepaliveInterval, false},
    // UCX's tcp moves data in segments of 8 KiB by default: a 256 KiB chunk (ucx_chunking.h) is
    // 32 sends and 32 receive callbacks. With 512 KiB segments a chunk is one, and ccl over
    // UCX's tcp went from 0.75-0.81x to 0.91-1.04x of ccl's own tcp at 16-64 MiB (net_bench.py,
    // veth, 2 and 4 ranks, best launches; 256 KiB segments gave 0.87-1.04x).
    {"UCX_TCP_TX_SEG_SIZE", "TX_SEG_SIZE", UcxWorker::kTcpSegmentSize, true},
    {"UCX_TCP_RX_SEG_SIZE", "RX_SEG_SIZE", UcxWorker::kTcpSegmentSize, true},
};

struct ConfigGuard {
  ucp_config_t* config = nullptr;
  ~ConfigGuard() {
    if (config != nullptr) ucp_config_release(config);
  }
};

}  // namespace

bool ucx_tcp_may_run(const char* tls, const char* net_devices) {
  if (net_devices != nullptr && *net_devices != '\0') return false;  // the user chose devices
  if (tls == nullptr || *tls == '\0') return true;                   // UCX's default: all
  std::string_view list(tls);
  const bool excluding = list.front() == '^';
  if (excluding) list.remove_prefix(1);
  bool named = false;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    if (name == "tcp" || (!excluding && name == "all")) named = true;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return excluding ? !named : named;
}

std::string ucx_status_text(const char* what, ucs_status_t status) {
  return std::string("UCX: ") + what + ": " + ucs_status_string(status);
}

UcxWorker::UcxWorker(int estimated_peers) {
  ConfigGuard config;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config.config);
  if (status != UCS_OK) {
    throw_error(cclSystemError, "%s", ucx_status_text("ucp_config_read", status).c_str());
  }
  const bool tcp_may_run = ucx_tcp_may_run(std::getenv("UCX_TLS"), std::getenv("UCX_NET_DEVICES"));
  for (const UcxDefault& d : kUcxDefaults) {
    if (std::getenv(d.variable) != nullptr) continue;  // the user's word stands
    if (d.tcp_only && !tcp_may_run) continue;
    status = ucp_config_modify(config.config, d.key, d.value);
    if (status != UCS_OK) {
      CCL_WARN(kNet, "%s",
               ucx_status_text((std::string("cannot set ") + d.variable).c_str(), status).c_str());
    }
  }

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  params.estimated_num_eps = static_cast<size_t>(estimated_peers > 0 ? estimated_peers : 1);
  params.name = "ccl";
  status = ucp_init(&params, config.config, &context_);
  if (status != UCS_OK) {
    context_ = nullptr;
    throw_error(cclSystemError, "%s", ucx_status_text("ucp_init", status).c_str());
  }

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  status = ucp_worker_create(context_, &worker_params, &worker_);
  if (status != UCS_OK) {
    worker_ = nullptr;
    ucp_cleanup(context_);
    throw_error(cclSystemError, "%s", ucx_status_text("ucp_worker_create", status).c_str());
  }

  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  status = ucp_worker_get_address(worker_, &address, &address_length);
  if (status == UCS_OK) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(address);
    address_.assign(bytes, bytes + address_length);
    ucp_worker_release_address(worker_, address);
    status = ucp_worker_get_efd(worker_, &event_fd_);
  }
  if (status != UCS_OK) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    throw_error(cclSystemError, "%s",
                ucx_status_text("worker address or event fd", status).c_str());
  }
}

UcxWorker::~UcxWorker() {
  destroy_worker();
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxWorker::destroy_worker() {
  if (worker_ == nullptr) return;
  flush_.release();  // before the worker its request belongs to
  ucp_worker_destroy(worker_);
  worker_ = nullptr;
  event_fd_ = -1;
}

bool UcxWorker::progress() {
  if (worker_ == nullptr) return false;
  bool any = false;
  for (int i = 0; i < kMaxProgressCalls && ucp_worker_progress(worker_) != 0; ++i) any = true;
  return any;
}

void UcxWorker::settle() noexcept {
  if (worker_ == nullptr) return;
  progress();
  auto collect = [this] {
    if (!flush_.active() || !flush_.done()) return;
    flushed_ = flush_covers_;
    flush_.release();
  };
  collect();
  if (flush_.active() || flushed_ == sent_) return;
  flush_covers_ = sent_;
  ucp_request_param_t param = polled_param();
  flush_.reset(ucp_worker_flush_nbx(worker_, &param));
  collect();  // a flush with nothing outstanding completes at once
}

ucs_status_t UcxWorker::try_arm() noexcept {
  return worker_ == nullptr ? UCS_ERR_NO_RESOURCE : ucp_worker_arm(worker_);
}

bool UcxWorker::arm() {
  const ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_OK) return true;
  if (status == UCS_ERR_BUSY) return false;
  throw_error(cclSystemError, "%s", ucx_status_text("ucp_worker_arm", status).c_str());
}

}  // namespace ccl::transport::ucx
