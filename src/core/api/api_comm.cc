// Communicator lifecycle: unique ids, init, destroy, abort, queries.
#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "core/api/api_guard.h"
#include "core/bootstrap/tcp_store.h"
#include "core/bootstrap/torch_store_client.h"
#include "core/bootstrap/unique_id.h"
#include "core/api/api_comm_support.h"
#include "core/launch/launcher_env.h"

using namespace ccl;
using namespace ccl::api;

namespace ccl::api {

std::chrono::milliseconds default_timeout() {
  int64_t seconds = config_int("CCL_TIMEOUT");
  if (seconds <= 0)
    throw_error(cclInvalidUsage, "CCL_TIMEOUT=%lld must be positive",
                static_cast<long long>(seconds));
  return std::chrono::milliseconds(seconds * 1000);
}

// The config's settings over `options` (the library defaults, or a parent's settings).
void apply_config(CommOptions& options, const cclConfig_t* config, const char* function) {
  if (config == nullptr) return;
  if (config->magic != CCL_CONFIG_MAGIC ||
      config->size < offsetof(cclConfig_t, commName) + sizeof(config->commName)) {
    throw_error(cclInvalidArgument,
                "%s: config was not initialized with CCL_CONFIG_INITIALIZER (magic %#x, size %zu)",
                function, config->magic, config->size);
  }
  if (config->timeoutMs != CCL_CONFIG_UNDEF_INT) {
    if (config->timeoutMs <= 0) {
      throw_error(cclInvalidArgument, "%s: config->timeoutMs %d must be positive", function,
                  config->timeoutMs);
    }
    options.timeout = std::chrono::milliseconds(config->timeoutMs);
  }
  if (config->blocking != CCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1) {
    throw_error(cclInvalidArgument, "%s: config->blocking %d must be 0 or 1", function,
                config->blocking);
  }
  if (config->blocking != CCL_CONFIG_UNDEF_INT) options.blocking = config->blocking != 0;
  if (config->commName != nullptr) options.name = config->commName;
}

CommOptions make_options(int nranks, int rank, const cclConfig_t* config, const char* function) {
  if (nranks < 1)
    throw_error(cclInvalidArgument, "%s: nranks %d must be at least 1", function, nranks);
  check_rank(rank, nranks, "rank", function);
  CommOptions options;
  options.rank = rank;
  options.nranks = nranks;
  options.timeout = default_timeout();
  apply_config(options, config, function);
  return options;
}

// A fresh rendezvous: a store server on the chosen interface, a random secret, and the unique id
// that names both (cclGetUniqueId; rank 0 under torchrun).
struct Rendezvous {
  std::unique_ptr<StoreServer> server;
  UniqueIdContents contents;
  cclUniqueId id;
};

Rendezvous open_rendezvous(std::chrono::milliseconds timeout) {
  Rendezvous r;
  r.contents.secret = random_secret();
  NetInterface iface = choose_interface();
  r.server = StoreServer::start(iface.address, r.contents.secret, timeout);
  r.contents.root = r.server->address();
  r.id = encode_unique_id(r.contents);
  CCL_INFO(kBootstrap, "unique id: rendezvous at %s (%s)", r.contents.root.to_string().c_str(),
           iface.name.c_str());
  return r;
}

cclComm* make_handle(std::shared_ptr<Communicator> impl) {
  auto* handle = new cclComm;
  handle->impl = std::move(impl);
  return handle;
}

cclComm* join(const CommOptions& options, const SocketAddress& root, const Secret& secret) {
  log_set_thread_rank(options.rank);
  if (!options.blocking) {
    // Returns at once (the caller gets cclInProgress); the rendezvous runs in the background.
    return make_handle(Communicator::create_async(
        options,
        [root, secret, rank = options.rank, nranks = options.nranks](
            Deadline deadline, const AbortFlag* abort) -> std::unique_ptr<Store> {
          return TcpStore::connect(root, secret, rank, nranks, deadline, abort);
        }));
  }
  Deadline deadline = Deadline::after(options.timeout);
  auto store = TcpStore::connect(root, secret, options.rank, options.nranks, deadline, nullptr);
  return make_handle(Communicator::create(options, *store));
}

// The result of a call that made `comm`: cclInProgress when it joins in the background.
cclResult_t made(cclResult_t result, const cclComm* comm) {
  const bool joining = result == cclSuccess && comm != nullptr && !comm->impl->blocking();
  return joining ? cclInProgress : result;
}

void release(cclComm* comm) {
  comm->impl->drain_background();
  comm->impl->mark_destroyed();
  comm->impl.reset();
  comm->magic = 0;
  delete comm;
}

// torchrun: the unique id goes through the agent's TCPStore (torch_store_client.h). Every rank
// calls cclCommInitFromEnv the same number of times, so the n-th call of each meets the n-th of
// the others under one key.
cclComm* join_through_torch_store(const LauncherEnv& env, const CommOptions& options) {
  static std::atomic<int> calls{0};
  const std::string key = env.torch_store_prefix + "/" + std::to_string(calls.fetch_add(1));
  const Deadline deadline = Deadline::after(options.timeout);
  TorchStoreClient store = TorchStoreClient::connect(SocketAddress::parse(env.address), deadline);
  if (env.rank == 0) {
    Rendezvous r = open_rendezvous(options.timeout);
    store.set(key, std::vector<uint8_t>(r.id.internal, r.id.internal + sizeof(r.id.internal)),
              deadline);
    CCL_INFO(kBootstrap, "cclCommInitFromEnv: the unique id is published in torchrun's store %s",
             env.address.c_str());
    cclComm* joined = join(options, r.contents.root, r.contents.secret);
    r.server->wait_finished(Deadline::after(options.timeout));
    return joined;
  }
  const std::vector<uint8_t> bytes = store.get(key, deadline);
  cclUniqueId id;
  if (bytes.size() != sizeof(id.internal)) {
    throw_error(cclRemoteError,
                "cclCommInitFromEnv: torchrun's store holds %zu bytes under %s, not a unique id",
                bytes.size(), key.c_str());
  }
  std::memcpy(id.internal, bytes.data(), bytes.size());
  const UniqueIdContents contents = decode_unique_id(id);
  return join(options, contents.root, contents.secret);
}

}  // namespace ccl::api

extern "C" {

cclResult_t cclGetUniqueId(cclUniqueId* uniqueId) {
  return guarded(kNoComm, "cclGetUniqueId", [&] {
    if (uniqueId == nullptr) throw_error(cclInvalidArgument, "cclGetUniqueId: uniqueId is NULL");
    *uniqueId = start_adopted_rendezvous(default_timeout());
  });
}

cclResult_t cclCommInitRankConfig(cclComm_t* comm, int nranks, cclUniqueId commId, int rank,
                                  cclConfig_t* config) {
  const cclResult_t result = guarded(kNoComm, "cclCommInitRank", [&] {
    if (comm == nullptr) throw_error(cclInvalidArgument, "cclCommInitRank: comm is NULL");
    *comm = nullptr;
    CommOptions options = make_options(nranks, rank, config, "cclCommInitRank");
    UniqueIdContents id = decode_unique_id(commId);
    *comm = join(options, id.root, id.secret);
  });
  return made(result, comm != nullptr ? *comm : nullptr);
}

cclResult_t cclCommInitRank(cclComm_t* comm, int nranks, cclUniqueId commId, int rank) {
  return cclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

cclResult_t cclCommInitFromEnv(cclComm_t* comm) {
  return guarded(kNoComm, "cclCommInitFromEnv", [&] {
    if (comm == nullptr) throw_error(cclInvalidArgument, "cclCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    LauncherEnv env = read_launcher_env();
    CommOptions options = make_options(env.nranks, env.rank, nullptr, "cclCommInitFromEnv");
    if (env.torch_store) {
      *comm = join_through_torch_store(env, options);
      return;
    }
    SocketAddress root = SocketAddress::parse(env.address);
    std::unique_ptr<StoreServer> server;
    if (env.rank == 0) {
      // Rank 0 serves the rendezvous; the server finishes once every rank has joined and left.
      server = StoreServer::start(root, env.secret, options.timeout, env.listen_fd);
      root = server->address();
    }
    cclComm* joined = join(options, root, env.secret);
    if (server) {
      // The others leave the store right after the last barrier; wait for that, so that a rank 0
      // that exits at once does not take the store away from a rank still reading its answer.
      server->wait_finished(Deadline::after(options.timeout));
    }
    *comm = joined;
  });
}

cclResult_t cclCommSplit(cclComm_t comm, int color, int key, cclComm_t* newcomm,
                         cclConfig_t* config) {
  const char* fn = "cclCommSplit";
  const cclResult_t result = guarded(comm, fn, [&] {
    Communicator& parent = checked_comm(comm, fn);
    if (newcomm == nullptr) throw_error(cclInvalidArgument, "%s: newcomm is NULL", fn);
    *newcomm = nullptr;
    if (color < 0 && color != CCL_SPLIT_NOCOLOR) {
      throw_error(cclInvalidArgument,
                  "%s: color %d must be >= 0, or CCL_SPLIT_NOCOLOR (-1) for no new communicator",
                  fn, color);
    }
    CommOptions options = parent.options();  // the parent's settings unless the config says
    apply_config(options, config, fn);
    std::shared_ptr<Communicator> child = parent.split(color, key, options);
    if (child) *newcomm = make_handle(std::move(child));
  });
  return made(result, newcomm != nullptr ? *newcomm : nullptr);
}

cclResult_t cclCommFinalize(cclComm_t comm) {
  return guarded(comm, "cclCommFinalize",
                 [&] { checked_comm(comm, "cclCommFinalize").finalize(); });
}

cclResult_t cclRedOpCreatePreMulSum(cclRedOp_t* op, void* scalar, cclDataType_t datatype,
                                    int residence, cclComm_t comm) {
  const char* fn = "cclRedOpCreatePreMulSum";
  return guarded(comm, fn, [&] {
    Communicator& c = checked_comm(comm, fn);
    if (op == nullptr) throw_error(cclInvalidArgument, "%s: op is NULL", fn);
    check_datatype(datatype, fn);
    *op = c.reduction_ops().create_premul_sum(scalar, datatype, residence);
  });
}

cclResult_t cclRedOpDestroy(cclRedOp_t op, cclComm_t comm) {
  return guarded(comm, "cclRedOpDestroy",
                 [&] { checked_comm(comm, "cclRedOpDestroy").reduction_ops().destroy(op); });
}

cclResult_t cclCommDestroy(cclComm_t comm) {
  return guarded(kNoComm, "cclCommDestroy", [&] {
    if (comm == nullptr) return;  // as free(NULL)
    checked_comm(comm, "cclCommDestroy");
    release(comm);
  });
}

cclResult_t cclCommAbort(cclComm_t comm) {
  return guarded(kNoComm, "cclCommAbort", [&] {
    if (comm == nullptr) return;
    // Within a second from any state: a running operation is released at once by the abort
    // flag; the grace only lets it finish telling the peers before we do.
    checked_comm(comm, "cclCommAbort").abort_and_notify(std::chrono::milliseconds(500));
    release(comm);
  });
}

cclResult_t cclCommGetAsyncError(cclComm_t comm, cclResult_t* asyncError) {
  return guarded(comm, "cclCommGetAsyncError", [&] {
    Communicator& c = checked_comm(comm, "cclCommGetAsyncError");
    if (asyncError == nullptr)
      throw_error(cclInvalidArgument, "cclCommGetAsyncError: asyncError is NULL");
    *asyncError = c.poll_async_error();
  });
}

cclResult_t cclCommCount(const cclComm_t comm, int* count) {
  return guarded(comm, "cclCommCount", [&] {
    Communicator& c = checked_comm(comm, "cclCommCount");
    if (count == nullptr) throw_error(cclInvalidArgument, "cclCommCount: count is NULL");
    *count = c.nranks();
  });
}

cclResult_t cclCommPeerTransport(const cclComm_t comm, int peer, const char** name) {
  return guarded(comm, "cclCommPeerTransport", [&] {
    Communicator& c = checked_comm(comm, "cclCommPeerTransport");
    if (name == nullptr) throw_error(cclInvalidArgument, "cclCommPeerTransport: name is NULL");
    if (peer < 0 || peer >= c.nranks()) {
      throw_error(cclInvalidArgument, "cclCommPeerTransport: peer %d is not a rank of 0..%d", peer,
                  c.nranks() - 1);
    }
    *name = c.peer_transport(peer);
  });
}

cclResult_t cclCommUserRank(const cclComm_t comm, int* rank) {
  return guarded(comm, "cclCommUserRank", [&] {
    Communicator& c = checked_comm(comm, "cclCommUserRank");
    if (rank == nullptr) throw_error(cclInvalidArgument, "cclCommUserRank: rank is NULL");
    *rank = c.rank();
  });
}

}  // extern "C"
