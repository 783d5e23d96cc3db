#include "transport/ucx/ucx_availability.h"

#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "transport/ucx/ucx_transport.h"

namespace ccl::transport {
namespace ucx {
namespace {

// Memory-only transports: not a network, whatever UCX calls their device.
bool is_memory_device(const UcxResource& r) { return r.device.rfind("memory", 0) == 0; }

// Whether one worker of `context` can make an error-handling endpoint to another: UCX 1.13
// refuses one over posix or sysv alone ("no peer failure handler"), so UCX_TLS=posix,sysv,cma
// initializes a context that reaches no peer. Empty when it can, else why not.
std::string endpoint_problem(ucp_context_h context) {
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h workers[2] = {nullptr, nullptr};
  std::string problem;
  ucs_status_t status = ucp_worker_create(context, &worker_params, &workers[0]);
  if (status == UCS_OK) status = ucp_worker_create(context, &worker_params, &workers[1]);
  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  if (status == UCS_OK) status = ucp_worker_get_address(workers[1], &address, &address_length);
  if (status != UCS_OK) {
    problem = std::string("no worker: ") + ucs_status_string(status);
  } else {
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.address = address;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ucp_ep_h ep = nullptr;
    status = ucp_ep_create(workers[0], &params, &ep);
    if (status != UCS_OK) {
      problem = std::string("no error-handling endpoint: ") + ucs_status_string(status);
    } else {
      ucp_request_param_t close{};
      close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      close.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &close);
      // A forced close of an endpoint that never carried anything completes in a few calls.
      for (int i = 0; i < 1000 && UCS_PTR_IS_PTR(request) &&
                      ucp_request_check_status(request) == UCS_INPROGRESS;
           ++i) {
        ucp_worker_progress(workers[0]);
        ucp_worker_progress(workers[1]);
      }
      if (UCS_PTR_IS_PTR(request)) ucp_request_free(request);
    }
    ucp_worker_release_address(workers[1], address);
  }
  for (ucp_worker_h w : workers) {
    if (w != nullptr) ucp_worker_destroy(w);
  }
  return problem;
}

// ucp_context_print_info writes to a FILE: this one collects it in memory.
std::string context_info(ucp_context_h context) {
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (stream == nullptr) return "";
  ucp_context_print_info(context, stream);
  std::fclose(stream);
  std::string result(text, size);
  std::free(text);
  return result;
}

}  // namespace

std::vector<UcxResource> parse_context_info(std::string_view text) {
  std::vector<UcxResource> resources;
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("resource") == std::string::npos) continue;
    const size_t flags = line.find("flags -- ");
    if (flags == std::string::npos) continue;
    std::string name = line.substr(flags + 9);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\r')) name.pop_back();
    const size_t slash = name.find('/');
    if (slash == std::string::npos || slash == 0) continue;
    resources.push_back(UcxResource{name.substr(0, slash), name.substr(slash + 1)});
  }
  return resources;
}

std::string error_handling_problem(const std::vector<UcxResource>& resources) {
  for (const UcxResource& r : resources) {
    if (r.transport != "self" && !is_memory_device(r)) return "";
  }
  return "no error-handling endpoint: UCX 1.13 handles peer failure over a network transport "
         "only, and this context has shared memory alone (UCX_TLS)";
}

bool has_rdma_network(const std::vector<UcxResource>& resources) {
  for (const UcxResource& r : resources) {
    const std::string& t = r.transport;
    if (t == "rc" || t == "ud" || t == "dc" || t.rfind("rc_", 0) == 0 || t.rfind("ud_", 0) == 0 ||
        t.rfind("dc_", 0) == 0) {
      return true;
    }
  }
  return false;
}

std::string describe(const std::string& version, const std::vector<UcxResource>& resources) {
  // Transports in UCX's order, each with its network devices.
  std::vector<std::pair<std::string, std::vector<std::string>>> seen;
  for (const UcxResource& r : resources) {
    if (r.transport == "self") continue;
    auto it = seen.begin();
    while (it != seen.end() && it->first != r.transport) ++it;
    if (it == seen.end()) it = seen.insert(seen.end(), {r.transport, {}});
    if (!is_memory_device(r)) it->second.push_back(r.device);
  }
  std::string text = "UCX " + version + ":";
  if (seen.empty()) return text + " no transport";
  for (size_t i = 0; i < seen.size(); ++i) {
    text += (i == 0 ? " " : ", ") + seen[i].first;
    const auto& devices = seen[i].second;
    for (size_t d = 0; d < devices.size(); ++d) {
      text += (d == 0 ? " (" : ", ") + devices[d];
    }
    if (!devices.empty()) text += ")";
  }
  return text;
}

NetAvailability probe_availability() {
  NetAvailability a;
  const std::string version = ucp_get_version_string();
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) {
    a.detail = "UCX " + version + ": ucp_config_read: " + ucs_status_string(status);
    return a;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (status != UCS_OK) {
    a.detail = "UCX " + version + ": ucp_init: " + ucs_status_string(status);
    return a;
  }
  const std::vector<UcxResource> resources = parse_context_info(context_info(context));
  // The rule when the resources could be read; two live workers only when they could not. A
  // worker opens UCX's own listening sockets, which a stranger's connection during
  // ucp_worker_create can abort in 1.13 (an assertion in ucp_worker_iface_init, seen under
  // integration.hostile): a process that never uses ucx should not open them.
  const std::string problem =
      resources.empty() ? endpoint_problem(context) : error_handling_problem(resources);
  ucp_cleanup(context);
  // Only self (a worker reaching itself): UCX_TLS left nothing that reaches a peer. No line at
  // all means a format this parser does not know; the context did initialize.
  bool reaches_peers = resources.empty();
  for (const UcxResource& r : resources) reaches_peers |= r.transport != "self";
  a.available = reaches_peers && problem.empty();
  a.by_default = a.available && has_rdma_network(resources);
  a.detail = describe(version, resources);
  if (!problem.empty()) a.detail += ": " + problem;
  return a;
}

}  // namespace ucx

NetAvailability ucx_availability() {
  static const NetAvailability cached = ucx::probe_availability();
  return cached;
}

}  // namespace ccl::transport
