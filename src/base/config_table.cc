// Every CCL_* variable, declared once. `ccl-info --env` prints this table.
#include "base/config.h"

namespace ccl {

const std::vector<ConfigVar>& config_vars() {
  static const std::vector<ConfigVar> vars = {
      // Logging
      {"CCL_DEBUG", ConfigType::String, "",
       "log level: WARN, INFO or TRACE (default: errors only in cclGetLastError)"},
      {"CCL_DEBUG_SUBSYS", ConfigType::String, "INIT,COLL,NET,SHM,BOOTSTRAP,ENV",
       "subsystems to log: INIT,COLL,NET,SHM,TOPO,TUNE,BOOTSTRAP,ENV,ALL; ^X excludes"},
      {"CCL_DEBUG_FILE", ConfigType::String, "",
       "write the log to this file (%h host, %p pid) instead of stderr"},
      // Waiting and failure detection
      {"CCL_TIMEOUT", ConfigType::Int, "300",
       "seconds any single wait may take before cclTimeout (cclConfig_t.timeoutMs overrides)"},
      {"CCL_SPIN_US", ConfigType::Int, "20",
       "microseconds a waiting rank polls before it yields the core (unset and more local ranks "
       "than cores: 0)"},
      {"CCL_YIELD_US", ConfigType::Int, "200",
       "microseconds a waiting rank polls with sched_yield before it sleeps (unset and more local "
       "ranks than cores: 2000)"},
      // Rendezvous and launchers
      {"CCL_COMM_ID", ConfigType::String, "",
       "host:port of the rendezvous for cclCommInitFromEnv (rank 0 listens)"},
      {"CCL_COMM_SECRET", ConfigType::String, "",
       "32 hex digits every rank presents at the rendezvous (set by cclrun)"},
      {"CCL_BOOTSTRAP_LISTEN_FD", ConfigType::Int, "-1",
       "a listening socket handed to rank 0 by cclrun"},
      {"CCL_RANK", ConfigType::Int, "-1", "this process's rank (set by cclrun)"},
      {"CCL_WORLD_SIZE", ConfigType::Int, "-1", "number of ranks (set by cclrun)"},
      {"CCL_LOCAL_RANK", ConfigType::Int, "-1",
       "rank among the ranks of this host (set by cclrun)"},
      {"CCL_LOCAL_SIZE", ConfigType::Int, "-1", "number of ranks on this host (set by cclrun)"},
      {"CCL_REPLACEMENT", ConfigType::Bool, "0",
       "1: this process replaces a rank that died (set by cclrun --restart-failed): it joins the "
       "survivors through cclCommGrow rather than the job's first rendezvous"},
      {"CCL_REPLACEMENT_COUNT", ConfigType::Int, "0",
       "how many times this rank was replaced so far (set by cclrun --restart-failed)"},
      {"CCL_HOSTID", ConfigType::String, "",
       "overrides the host identity (hostname + boot id): ranks with equal ids use shared memory"},
      // Transports
      {"CCL_SHM_DISABLE", ConfigType::Bool, "0",
       "1: never use shared memory between ranks (tcp instead)"},
      {"CCL_SHM_SLOTS", ConfigType::Int, "8", "slots in each shared-memory channel ring"},
      {"CCL_SHM_WINDOW", ConfigType::Bytes, "1M",
       "bytes of each rank's shared-memory mailbox; collectives up to this size read their peers' "
       "data in place (0: never)"},
      {"CCL_SHM_CMA", ConfigType::Bool, "1",
       "1: a broadcast receiver may read part of the root's buffer straight from the root's "
       "process (process_vm_readv) where the kernel allows it; 0: never"},
      {"CCL_SHM_POOL", ConfigType::Bytes, "32M",
       "bytes of shared memory each rank keeps for its inbound rings and window; with many local "
       "ranks the rings share it evenly (0: no limit, every ring CCL_BUFFSIZE)"},
      {"CCL_BUFFSIZE", ConfigType::Bytes, "4M",
       "bytes of buffering per connection and direction (shm ring, chunk size)"},
      {"CCL_SOCKET_IFNAME", ConfigType::String, "",
       "interfaces for tcp: prefixes, ^ to exclude, = for exact names (eth0, ^docker,lo, =eth1)"},
      {"CCL_SOCKET_FAMILY", ConfigType::String, "",
       "AF_INET or AF_INET6 to force the address family of tcp"},
      {"CCL_NET", ConfigType::String, "",
       "network transports between hosts: a list in order of preference (ucx,tcp) or ^ to "
       "exclude (^ib); a pair of ranks on different hosts takes the first of the lower rank's "
       "list that the other offers; a listed transport that cannot run fails init saying why "
       "(default: ib where a device is up, ucx where UCX has a network beyond tcp, then tcp)"},
      {"CCL_NSOCKS_PERTHREAD", ConfigType::Int, "1",
       "tcp: sockets per helper thread for each peer (NCCL's variable); messages of at least "
       "2 x 64 KiB are split into chunks of at least 64 KiB spread over the sockets"},
      {"CCL_SOCKET_NTHREADS", ConfigType::Int, "1",
       "tcp: threads that move each peer's chunks (NCCL's variable); sockets per peer = "
       "CCL_SOCKET_NTHREADS x CCL_NSOCKS_PERTHREAD, at most 64"},
      {"CCL_IB_HCA", ConfigType::String, "",
       "InfiniBand/RoCE devices to use, NCCL's syntax: prefixes (mlx5), =exact names, ^ to "
       "exclude, device:port (mlx5_0:1,mlx5_1:1) (default: every device with an active port)"},
      {"CCL_IB_GID_INDEX", ConfigType::Int, "-1",
       "RoCE: the GID index to use (default -1: the first RoCE v2 GID that is not link-local and "
       "matches CCL_IB_ADDR_FAMILY)"},
      {"CCL_IB_ADDR_FAMILY", ConfigType::String, "AF_INET",
       "RoCE: the address family of the GID chosen when CCL_IB_GID_INDEX is not set: AF_INET "
       "(IPv4-mapped) or AF_INET6"},
      {"CCL_IB_TIMEOUT", ConfigType::Int, "20",
       "InfiniBand: the QP's local ACK timeout exponent (4.096 us x 2^value)"},
      {"CCL_IB_RETRY_CNT", ConfigType::Int, "7", "InfiniBand: the QP's transport retry count"},
      {"CCL_IB_QPS_PER_CONNECTION", ConfigType::Int, "1",
       "InfiniBand: RC queue pairs per peer connection; a message's chunks are spread over them"},
      {"CCL_IB_REG_CACHE", ConfigType::Int, "0",
       "InfiniBand: registrations of unregistered user buffers kept after their message, for "
       "later messages in the same pages (0: each is deregistered when its message completes); "
       "only safe where buffers are not freed and mapped again at the same address during the "
       "job (a cached MR keeps the old pages): cclCommRegister is the safe way to keep one"},
      {"CCL_IB_LIBRARY", ConfigType::String, "libibverbs.so.1",
       "the verbs library ccl loads at run time (dlopen); where it cannot be loaded the ib "
       "transport is unavailable and ccl says why"},
      // CUDA
      {"CCL_CUDA", ConfigType::Bool, "1",
       "0: never load the CUDA driver (libcuda.so.1): every buffer is host memory and "
       "cclStreamFromCuda fails"},
      {"CCL_CUDA_LIBRARY", ConfigType::String, "libcuda.so.1",
       "the CUDA driver library ccl loads at run time (dlopen)"},
      {"CCL_CUDA_IPC", ConfigType::Bool, "1",
       "0: no device collectives among the ranks of one host (their scratch shared through "
       "CUDA IPC or peer access): device buffers go through host memory"},
      {"CCL_CUDA_STAGING_CHUNK", ConfigType::Bytes, "4M",
       "device buffers staged through host memory (ranks on several hosts): allreduce, reduce and "
       "broadcast run in chunks of this size, each chunk's copies overlapping the others' "
       "network transfers"},
      {"CCL_CUDA_SCRATCH", ConfigType::Bytes, "64M",
       "device memory each rank of a host's device collectives allocates for its peers to read "
       "(two halves; at least 64K): larger moves bigger chunks per flag round"},
      // Topology
      {"CCL_TOPO_FILE", ConfigType::String, "",
       "read the topology from this file (ccl's XML, or hwloc's from lstopo --of xml) instead of "
       "discovering it"},
      {"CCL_TOPO_DUMP_FILE", ConfigType::String, "",
       "write the topology in use to this file (ccl's XML) at communicator init"},
      // Algorithms
      {"CCL_ALGO", ConfigType::String, "",
       "algorithms the tuner may choose, NCCL's syntax: a list (ring,tree), ^ to exclude, per "
       "collective with ; (allreduce:tree,ring;broadcast:^tree); collectives: allreduce, "
       "broadcast, reduce, allgather, reducescatter, alltoall, barrier; names: direct, ring, tree, "
       "recursive_doubling, rabenseifner, hierarchical, pairwise, dissemination"},
      {"CCL_PROTO", ConfigType::String, "",
       "protocols the tuner may choose, same syntax: LL (each piece in one message) and Simple "
       "(pipelined chunks); LL128 is accepted and never available"},
      {"CCL_TUNER_FILE", ConfigType::String, "",
       "per-link-class figures (alpha, beta) for the cost model, read from this file instead of "
       "the probe at communicator init"},
      {"CCL_TUNER_CACHE", ConfigType::String, "",
       "directory where rank 0 keeps the probed figures per host, shape, transports and ccl "
       "version, so that later launches skip the probe and choose alike (default: "
       "$XDG_CACHE_HOME/ccl, else $HOME/.cache/ccl); none: probe at every init"},
      {"CCL_CHUNKSIZE", ConfigType::Bytes, "0",
       "bytes per pipelined chunk; 0: derived from CCL_BUFFSIZE"},
      {"CCL_CHECK_MODE", ConfigType::Bool, "0",
       "1: ranks compare (collective, count, datatype, op, root) before each collective; a "
       "mismatch fails every rank with cclInvalidUsage naming the ranks and fields"},
      {"CCL_TRACE_BUFFER_SIZE", ConfigType::Int, "64",
       "operations each rank keeps in its flight recorder (dumped on timeout, error and "
       "SIGUSR1); 0: off"},
      // Trace export (src/core/trace/)
      {"CCL_TRACE_FILE", ConfigType::String, "",
       "write each rank's operations and their executor rounds as a Chrome/Perfetto trace "
       "(ui.perfetto.dev) to this file when the communicator is finalized, destroyed or aborted, "
       "or the process exits; %h host, %p pid, %r rank; without %r, .<rank> goes before the "
       "extension (trace.json -> trace.0.json); a process's later communicators add "
       ".<commName>-<tag> (default: off)"},
      {"CCL_TRACE_MAX_EVENTS", ConfigType::Int, "1000000",
       "events (operations + rounds) each communicator's trace keeps, about 100 bytes each; "
       "more are counted and dropped (the file's otherData.dropped_events)"},
      // Metrics export (src/core/diagnostics/metrics*.h, docs/metrics.md)
      {"CCL_METRICS_FILE", ConfigType::String, "",
       "write the operation counters and time histograms of every communicator of this process "
       "as Prometheus text (for node_exporter's textfile collector) to this file, one per process, "
       "every CCL_METRICS_INTERVAL seconds and when a communicator is finalized or destroyed or "
       "the process exits; %h host, %p pid, %r rank; without %r, .<rank> goes before the "
       "extension (ccl.prom -> ccl.0.prom); replaced atomically (default: off)"},
      {"CCL_METRICS_INTERVAL", ConfigType::Int, "10",
       "seconds between rewrites of CCL_METRICS_FILE, 1 to 86400"},
  };
  return vars;
}

}  // namespace ccl
