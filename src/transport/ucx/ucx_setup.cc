#include "transport/ucx/ucx_setup.h"

#include <errno.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap/store.h"
#include "transport/ucx/ucx_endpoint_info.h"
#include "transport/ucx/ucx_wire.h"

namespace ccl::transport::ucx {
namespace {

using namespace std::chrono;

// The hello loop sleeps on the worker's event fd in slices, so that it sees the abort flag.
constexpr milliseconds kHelloSlice{20};
// A failed connect()'s bound for the forced closes of its endpoints.
constexpr milliseconds kCloseTimeout{200};

ucp_ep_h create_endpoint(UcxWorker& worker, UcxConnection& conn, const Bytes& address) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxConnection::on_endpoint_error;
  params.err_handler.arg = &conn;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(worker.worker(), &params, &ep);
  if (status != UCS_OK) {
    // Unreachable, refused or reset: the peer's process (or its host) is gone, as a closed tcp
    // connection says; anything else is this side's failure.
    const bool peer_gone = status == UCS_ERR_UNREACHABLE || status == UCS_ERR_CONNECTION_RESET ||
                           status == UCS_ERR_REJECTED || status == UCS_ERR_ENDPOINT_TIMEOUT;
    throw_peer_error(peer_gone ? cclRemoteError : cclSystemError, conn.peer(),
                     "ucx: cannot create an endpoint to rank %d: %s", conn.peer(),
                     ucs_status_string(status));
  }
  return ep;
}

void sleep_on_worker(UcxWorker& worker, milliseconds slice) {
  if (worker.progress() || !worker.arm()) return;
  pollfd fd{worker.event_fd(), POLLIN, 0};
  if (::poll(&fd, 1, static_cast<int>(slice.count())) < 0 && errno != EINTR) {
    throw_system_error(errno, "ucx: poll");
  }
}

}  // namespace

std::string address_key(const std::string& comm_tag, int rank) {
  return comm_tag + "/ucx/" + std::to_string(rank);
}

void publish_address(const SetupContext& ctx, const UcxWorker& worker, bool* published) {
  if (*published) return;
  if (ctx.store == nullptr) throw_error(cclInvalidUsage, "ucx: connect() needs a store");
  ctx.store->set(address_key(ctx.comm_tag, ctx.rank), worker.address());
  *published = true;
}

std::vector<std::unique_ptr<UcxConnection>> connect_peers(
    const SetupContext& ctx, UcxWorker& worker, std::span<const int> peers,
    const UcxOptions& options, std::vector<std::unique_ptr<UcxConnection>>& retired) {
  std::vector<std::unique_ptr<UcxConnection>> conns;
  const uint64_t hash = tag_hash(ctx.comm_tag.data(), ctx.comm_tag.size());
  // When the hello fails, the endpoints are closed by force and their connections retired: the
  // worker may still call their error handlers and write their buffers until it is destroyed.
  struct Guard {
    std::vector<std::unique_ptr<UcxConnection>>& conns;
    std::vector<std::unique_ptr<UcxConnection>>& retired;
    UcxWorker& worker;
    bool armed = true;
    ~Guard() {
      if (!armed) return;
      for (auto& c : conns) c->begin_shutdown();
      std::vector<PendingOp> closing;
      for (auto& c : conns) closing.push_back(c->close_endpoint());
      // Forced closes of endpoints without traffic complete within a few progress calls; an
      // unfinished one is completed by UCX once its handle is freed.
      const Deadline deadline = Deadline::after(kCloseTimeout);
      for (;;) {
        bool all = true;
        for (auto& op : closing) all &= !op.active() || op.done();
        if (all || deadline.expired()) break;
        if (!worker.progress()) std::this_thread::yield();
      }
      closing.clear();
      for (auto& c : conns) c->release_requests();
      for (auto& c : conns) retired.push_back(std::move(c));
    }
  } guard{conns, retired, worker};

  for (int peer : peers) {
    const Bytes address = ctx.store->get(address_key(ctx.comm_tag, peer), ctx.deadline);
    auto conn = std::make_unique<UcxConnection>(peer, ctx.rank, worker);
    conn->attach(create_endpoint(worker, *conn, address));
    conns.push_back(std::move(conn));
  }
  for (auto& c : conns) c->start_hello(ctx.nranks, hash);
  for (;;) {
    worker.progress();
    bool all = true;
    for (auto& c : conns) all &= c->hello_done(ctx.nranks, hash);
    if (all) break;
    if (ctx.abort != nullptr && ctx.abort->load()) {
      throw_error(cclRemoteError, "ucx: rank %d: connect() aborted", ctx.rank);
    }
    if (ctx.deadline.expired()) {
      std::string missing;
      for (auto& c : conns) {
        if (!c->hello_done(ctx.nranks, hash)) missing += " " + std::to_string(c->peer());
      }
      throw_error(cclTimeout, "ucx: rank %d: no hello from rank(s)%s before the deadline", ctx.rank,
                  missing.c_str());
    }
    sleep_on_worker(
        worker,
        std::min(kHelloSlice, duration_cast<milliseconds>(ctx.deadline.remaining(kHelloSlice))));
  }
  for (auto& c : conns) {
    // Wire-up is complete (the hellos crossed): the endpoint's lanes are final.
    const bool native_rma = has_rma_lane(endpoint_info(c->endpoint()));
    const bool rma = options.rma == UcxOptions::Rma::kAlways ||
                     (options.rma == UcxOptions::Rma::kAuto && native_rma);
    c->start(rma);
    CCL_INFO(kNet | kInit, "ucx: rank %d connected to rank %d (RMA %s%s)", ctx.rank, c->peer(),
             rma ? "on" : "off", native_rma ? ", native" : "");
  }
  guard.armed = false;
  return conns;
}

}  // namespace ccl::transport::ucx
