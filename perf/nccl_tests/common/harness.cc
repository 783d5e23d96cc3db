#include "harness.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "datatype.h"
#include "device_memory.h"
#include "json_report.h"
#include "options.h"
#include "pattern.h"
#include "rank_info.h"
#include "report.h"

namespace ccl::perf {
namespace {

using Clock = std::chrono::steady_clock;

// A failed call: the run stops, the communicator is aborted and the exit status is 2. The
// device:: calls (device_memory.h) throw std::runtime_error, which ends the run the same way.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where a buffer lives: malloc'd host memory, cclMemAlloc's (-R), or the rank's GPU (--memory).
enum class Memory { Host, Registered, Device };

struct BufferDeleter {
  Memory memory = Memory::Host;
  void operator()(char* p) const {
    switch (memory) {
      case Memory::Registered:
        cclMemFree(p);
        return;
      case Memory::Device:
        device::release(p);
        return;
      case Memory::Host:
        std::free(p);
        return;
    }
  }
};
using Buffer = std::unique_ptr<char, BufferDeleter>;

// Page-aligned and touched (zeroed), so that page faults stay out of the timed loop. Registered
// (-R 1 or 2): from cclMemAlloc, memory the other ranks can map (nccl-tests' ncclMemAlloc
// buffers). Device: cudaMalloc on the current GPU.
Buffer allocate(size_t bytes, Memory memory) {
  const size_t page = 4096;
  const size_t rounded = std::max<size_t>((bytes + page - 1) / page * page, page);
  void* p = nullptr;
  switch (memory) {
    case Memory::Registered:
      if (cclMemAlloc(&p, rounded) != cclSuccess) {
        throw Failure("cclMemAlloc of " + std::to_string(rounded) +
                      " bytes failed: " + cclGetLastError(nullptr));
      }
      std::memset(p, 0, rounded);
      break;
    case Memory::Device:
      p = device::alloc(rounded);
      break;
    case Memory::Host:
      p = std::aligned_alloc(page, rounded);
      if (!p) throw Failure("cannot allocate " + std::to_string(rounded) + " bytes");
      std::memset(p, 0, rounded);
      break;
  }
  return Buffer(static_cast<char*>(p), BufferDeleter{memory});
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class Bench {
 public:
  Bench(Options o, Collective coll, cclComm_t comm, int rank, int nranks)
      : o_(std::move(o)), info_(collective_info(coll)), comm_(comm), rank_(rank), n_(nranks) {}

  // After a failure the communicator is aborted first, so queued work cannot hold this up.
  ~Bench() {
    if (stream_) cclStreamDestroy(stream_);
    if (cuda_stream_) device::destroy_stream(cuda_stream_);
  }

  void close() {
    cclStream_t s = stream_;
    stream_ = nullptr;
    if (s) call(cclStreamDestroy(s), "cclStreamDestroy");
    if (cuda_stream_) device::destroy_stream(cuda_stream_);
    cuda_stream_ = nullptr;
  }

  int run(const char* program) {
    report_.program = program;
    report_.collective = info_.name;
    cclGetVersion(&report_.ccl_version);
    report_.nranks = n_;
    print(run_header(o_));
    describe_ranks();
    if (info_.has_root && o_.root >= n_)
      throw Failure("root " + std::to_string(o_.root) + " is not a rank of " + std::to_string(n_));
    const Memory memory = o_.device_memory         ? Memory::Device
                          : o_.local_register != 0 ? Memory::Registered
                                                   : Memory::Host;
    send_ = allocate(o_.max_bytes, memory);
    recv_ = allocate(o_.max_bytes, memory);
    if (o_.check) expected_ = allocate(o_.max_bytes, Memory::Host);
    if (o_.device_memory && o_.check) {
      // The check data is made and read on the host, and copied to and from the GPU.
      host_send_ = allocate(o_.max_bytes, Memory::Host);
      host_recv_ = allocate(o_.max_bytes, Memory::Host);
    }
    if (!o_.blocking && !o_.stream_null) {
      if (o_.device_memory) {  // as nccl-tests: the collectives ordered on a CUDA stream
        cuda_stream_ = device::create_stream();
        call(cclStreamFromCuda(cuda_stream_, &stream_), "cclStreamFromCuda");
      } else {
        call(cclStreamCreate(&stream_), "cclStreamCreate");
      }
    }
    report_.options = o_;
    print(column_header(o_.report_cputime != 0));

    const std::vector<cclRedOp_t> ops = info_.has_op ? o_.ops : std::vector<cclRedOp_t>{cclSum};
    std::vector<int> roots{-1};
    if (info_.has_root) {
      roots.clear();
      for (int r = 0; r < n_; ++r) {
        if (o_.root == -1 || o_.root == r) roots.push_back(r);
      }
    }
    for (cclDataType_t type : o_.types) {
      for (cclRedOp_t op : ops) {
        for (int root : roots) time_test(type, op, root);
      }
    }

    const int64_t errors = sum_all(errors_);
    report_.out_of_bounds = errors;
    report_.avg_busbw = bw_count_ ? bw_sum_ / bw_count_ : 0.0;
    print(footer(errors, report_.avg_busbw));
    if (rank_ == 0 && !o_.json_path.empty()) write_json();
    return errors ? 1 : 0;
  }

 private:
  void call(cclResult_t r, const char* what) {
    if (r == cclSuccess) return;
    std::string detail = cclGetLastError(comm_);
    if (detail.empty()) detail = cclGetLastError(nullptr);  // calls without a communicator
    throw Failure(std::string(what) + " failed: " + cclGetErrorString(r) + ": " + detail);
  }

  void print(const std::string& s) const {
    if (rank_ == 0) std::fputs(s.c_str(), stdout);
  }

  // Every rank's pid and host, gathered with an allreduce (max) of a zeroed table.
  void describe_ranks() {
    std::vector<unsigned char> table(static_cast<size_t>(n_) * kRankRecordBytes, 0);
    encode_rank_record(static_cast<int>(getpid()), local_hostname(),
                       table.data() + static_cast<size_t>(rank_) * kRankRecordBytes);
    call(cclAllReduce(table.data(), table.data(), table.size(), cclUint8, cclMax, comm_, nullptr),
         "cclAllReduce (rank table)");
    report_.ranks = decode_rank_table(table.data(), n_);
    print("# Using devices\n");
    for (const auto& d : report_.ranks) print(rank_line(d.rank, 0, d.pid, d.host, d.device));
    if (o_.device_memory) select_device();
    limit_memory();
  }

  // --memory device: GPU (local rank mod the GPUs seen) of this process, or a clear failure
  // where there is none (on every rank: each finds the same reason on its own host).
  void select_device() {
    const std::string why = device::unavailable_reason();
    if (!why.empty()) throw Failure("--memory device: " + why);
    int local = 0;
    for (int r = 0; r < rank_; ++r) local += report_.ranks[r].host == report_.ranks[rank_].host;
    const int gpu = device::select_for(local);
    if (rank_ == 0) print("# Device buffers: rank 0 on GPU " + std::to_string(gpu) + "\n");
  }

  // nccl-tests shrinks maxBytes to what the device holds; here the host's memory is shared by
  // the ranks on it.
  void limit_memory() {
    int local = 0;
    for (const auto& d : report_.ranks) local += d.host == report_.ranks[rank_].host;
    const uint64_t total = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                           static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
    const uint64_t reserve = uint64_t{1} << 30;
    // Host buffers: send, receive and (checking) expected; device mode adds two host mirrors.
    const int host_buffers = o_.device_memory ? (o_.check ? 3 : 0) : (o_.check ? 3 : 2);
    uint64_t limit = total > reserve ? (total - reserve) / std::max(local, 1) /
                                           static_cast<uint64_t>(std::max(host_buffers, 1))
                                     : uint64_t{1} << 20;
    if (o_.device_memory) {  // send and receive on the GPU, which ranks may share
      limit = std::min<uint64_t>(limit, device::free_bytes() / 2 / std::max(local, 1) * 9 / 10);
    }
    call(cclAllReduce(&limit, &limit, 1, cclUint64, cclMin, comm_, nullptr),
         "cclAllReduce (memory limit)");
    if (o_.max_bytes > limit) {
      o_.max_bytes = limit;
      o_.min_bytes = std::min(o_.min_bytes, o_.max_bytes);
      print("#\n# Reducing maxBytes to " + std::to_string(limit) + " due to memory limitation\n");
    }
  }

  void barrier() {
    int32_t token = 0;
    call(cclAllReduce(&token, &token, 1, cclInt32, cclSum, comm_, nullptr),
         "cclAllReduce (barrier)");
  }

  int64_t sum_all(int64_t v) {
    call(cclAllReduce(&v, &v, 1, cclInt64, cclSum, comm_, nullptr), "cclAllReduce (sum)");
    return v;
  }

  // Combines the per-iteration time across ranks as -a asks.
  double combine_time(double t) {
    if (o_.average == Average::Rank0) return t;
    const cclRedOp_t op = o_.average == Average::Min   ? cclMin
                          : o_.average == Average::Max ? cclMax
                                                       : cclSum;
    call(cclAllReduce(&t, &t, 1, cclFloat64, op, comm_, nullptr), "cclAllReduce (time)");
    return o_.average == Average::Mean ? t / n_ : t;
  }

  void run_collective(const void* send, void* recv, size_t count, cclDataType_t type, cclRedOp_t op,
                      int root) {
    switch (info_.coll) {
      case Collective::AllReduce:
        return call(cclAllReduce(send, recv, count, type, op, comm_, stream_), "cclAllReduce");
      case Collective::Broadcast:
        return call(cclBroadcast(send, recv, count, type, root, comm_, stream_), "cclBroadcast");
      case Collective::Reduce:
        return call(cclReduce(send, recv, count, type, op, root, comm_, stream_), "cclReduce");
      case Collective::AllGather:
        return call(cclAllGather(send, recv, count, type, comm_, stream_), "cclAllGather");
      case Collective::ReduceScatter:
        return call(cclReduceScatter(send, recv, count, type, op, comm_, stream_),
                    "cclReduceScatter");
      case Collective::AlltoAll:
        return call(cclAlltoAll(send, recv, count, type, comm_, stream_), "cclAlltoAll");
      case Collective::SendRecv:  // a ring: send to the next rank, receive from the previous
        call(cclGroupStart(), "cclGroupStart");
        call(cclSend(send, count, type, (rank_ + 1) % n_, comm_, stream_), "cclSend");
        call(cclRecv(recv, count, type, (rank_ + n_ - 1) % n_, comm_, stream_), "cclRecv");
        return call(cclGroupEnd(), "cclGroupEnd");
    }
  }

  // One operation; `iter` moves the buffers through the allocation (nccl-tests' rotation, which
  // keeps small sizes from always hitting the same cache lines).
  void start_coll(const CheckSpec& spec, const Geometry& g, bool in_place, int iter) {
    const size_t elt = type_info(spec.type).size;
    const size_t total = row_bytes(g, elt);
    const size_t steps = total ? std::max<size_t>(o_.max_bytes / total, 1) : 1;
    const size_t shift = total * (static_cast<size_t>(iter) % steps);
    char* send = send_.get() + shift;
    char* recv = recv_.get() + shift;
    run_collective(op_send_ptr(spec, rank_, g, in_place, send, recv),
                   op_recv_ptr(spec, rank_, g, in_place, recv), g.param_count, spec.type, spec.op,
                   spec.root);
    if (o_.blocking) {
      complete_coll();
      if (o_.blocking == 1) barrier();
    }
  }

  void complete_coll() {
    if (!stream_) return;  // NULL stream: every call already returned complete
    if (o_.timeout_s <= 0) return call(cclStreamSynchronize(stream_), "cclStreamSynchronize");
    const auto t0 = Clock::now();
    for (;;) {
      const cclResult_t r = cclStreamQuery(stream_);
      if (r == cclSuccess) return;
      if (r != cclInProgress) call(r, "cclStreamQuery");
      cclResult_t async = cclSuccess;
      call(cclCommGetAsyncError(comm_, &async), "cclCommGetAsyncError");
      call(async, "asynchronous operation");
      if (seconds_since(t0) > o_.timeout_s) {
        throw Failure(local_hostname() + ": Test timeout (" + std::to_string(o_.timeout_s) + "s)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // The buffers the check data is made in: the GPU's host mirrors in device mode.
  CheckBuffers check_buffers() const {
    if (o_.device_memory) return {host_send_.get(), host_recv_.get(), expected_.get()};
    return {send_.get(), recv_.get(), expected_.get()};
  }

  void prepare(const CheckSpec& spec, const Geometry& g, bool in_place) {
    prepare_check(spec, rank_, g, in_place, check_buffers());
    if (o_.device_memory) {
      device::to_device(send_.get(), host_send_.get(), o_.max_bytes);
      device::to_device(recv_.get(), host_recv_.get(), o_.max_bytes);
    }
  }

  // What the operation wrote, where the host can compare it.
  const void* received(const CheckSpec& spec, const Geometry& g, bool in_place) {
    const void* got = op_recv_ptr(spec, rank_, g, in_place, recv_.get());
    if (!o_.device_memory) return got;
    const size_t offset = static_cast<const char*>(got) - recv_.get();
    const size_t bytes = g.recv_count * type_info(spec.type).size;
    device::to_host(host_recv_.get() + offset, got, bytes);
    return host_recv_.get() + offset;
  }

  Measurement bench_time(CheckSpec spec, const Geometry& g, bool in_place) {
    if (o_.check) {
      spec.seed = 99;
      prepare(spec, g, in_place);
    }
    start_coll(spec, g, in_place, 0);  // in step before timing
    complete_coll();
    barrier();

    const auto t0 = Clock::now();
    for (int iter = 0; iter < o_.iters; ++iter) {
      if (o_.agg_iters > 1) call(cclGroupStart(), "cclGroupStart");
      for (int a = 0; a < o_.agg_iters; ++a) start_coll(spec, g, in_place, iter * o_.agg_iters + a);
      if (o_.agg_iters > 1) call(cclGroupEnd(), "cclGroupEnd");
    }
    const double ops = static_cast<double>(o_.iters) * o_.agg_iters;
    const double cpu_sec = seconds_since(t0) / ops;
    complete_coll();
    const double sec = combine_time(seconds_since(t0) / ops);

    Measurement m;
    const size_t elt = type_info(spec.type).size;
    m.algbw = alg_bandwidth(info_.coll, g, elt, n_, sec);
    m.busbw = bus_bandwidth(info_.coll, m.algbw, n_);
    m.time_us = (o_.report_cputime ? cpu_sec : sec) * 1e6;
    barrier();

    // nccl-tests' rule: some collectives are not checked in place ("#wrong" stays N/A).
    if (o_.check && (!in_place || checked_in_place(info_.coll))) {
      int64_t wrong = 0;
      for (int c = 0; c < o_.check; ++c) {
        spec.seed = ++check_seed_;
        prepare(spec, g, in_place);
        start_coll(spec, g, in_place, 0);
        complete_coll();
        const void* got = received(spec, g, in_place);
        const int64_t local = count_wrong(got, expected_.get(), g.recv_count, spec.type);
        if (local) ++errors_;
        wrong = sum_all(local);
        if (wrong) break;
      }
      m.wrong = wrong;
    }
    bw_sum_ += m.busbw;
    ++bw_count_;
    print(row_body(m.time_us, m.algbw, m.busbw, m.wrong));
    return m;
  }

  void time_test(cclDataType_t type, cclRedOp_t op, int root) {
    const size_t elt = type_info(type).size;
    const CheckSpec spec{info_.coll, type, op, root, n_, 0};
    barrier();
    for (size_t size : warmup_sizes(o_.min_bytes, o_.max_bytes)) {
      const Geometry g = geometry(info_.coll, size, elt, n_);
      if (g.param_count == 0) continue;
      for (int w = 0; w < o_.warmup_iters; ++w) start_coll(spec, g, false, w);
      complete_coll();
    }
    const auto sizes = size_sweep(o_.min_bytes, o_.max_bytes, o_.step_bytes, o_.step_factor);
    int cycles = o_.run_cycles;
    do {
      for (size_t size : sizes) {
        const Geometry g = geometry(info_.coll, size, elt, n_);
        if (g.param_count == 0) continue;  // nothing to move: no row
        RowResult row;
        row.size = row_bytes(g, elt);
        row.count = g.param_count;
        row.type = type_info(type).name;
        row.redop = info_.has_op ? op_name(op) : "none";
        row.root = root;
        print(row_preamble(row.size, row.count, row.type.c_str(), row.redop.c_str(), root));
        row.out_of_place = bench_time(spec, g, false);
        row.in_place = bench_time(spec, g, true);
        print("\n");
        if (rank_ == 0 && !o_.json_path.empty()) report_.rows.push_back(row);
      }
    } while (--cycles != 0);
  }

  void write_json() {
    std::ofstream out(o_.json_path);
    out << to_json(report_);
    if (!out) std::fprintf(stderr, "# could not write %s\n", o_.json_path.c_str());
  }

  Options o_;
  const CollectiveInfo& info_;
  cclComm_t comm_;
  int rank_;
  int n_;
  cclStream_t stream_ = nullptr;
  CUstream_st* cuda_stream_ = nullptr;  // --memory device, stream mode
  Buffer send_, recv_, expected_;
  Buffer host_send_, host_recv_;  // --memory device with checks: the GPU buffers' host mirrors
  RunReport report_;
  int64_t errors_ = 0;  // rows x placements with a wrong element on this rank
  uint64_t check_seed_ = 0;
  double bw_sum_ = 0;
  int bw_count_ = 0;
};

}  // namespace

int run_perf_main(int argc, char** argv, Collective coll) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // every line as soon as it is complete
  const char* program = collective_info(coll).binary;
  const ParseResult parsed = parse_options(argc, argv);
  if (!parsed.error.empty()) {
    std::fprintf(stderr, "%s: %s\n%s", program, parsed.error.c_str(), usage(program).c_str());
    return 1;
  }
  if (parsed.options.help) {
    std::fputs(usage(program).c_str(), stdout);
    return 0;
  }

  cclComm_t comm = nullptr;
  const cclResult_t init = cclCommInitFromEnv(&comm);
  if (init != cclSuccess) {
    std::fprintf(stderr, "%s: cclCommInitFromEnv failed: %s: %s\n", program,
                 cclGetErrorString(init), cclGetLastError(nullptr));
    return 2;
  }
  int rank = 0, nranks = 1;
  cclCommUserRank(comm, &rank);
  cclCommCount(comm, &nranks);
  if (rank == 0) {
    for (const auto& note : parsed.notes) std::printf("%s\n", note.c_str());
  }

  int status;
  Bench bench(parsed.options, coll, comm, rank, nranks);
  try {
    status = bench.run(program);
    bench.close();
  } catch (const std::runtime_error& f) {     // Failure, or a device:: call's error
    if (rank == 0) std::fputs("\n", stdout);  // end a row cut short
    std::fflush(stdout);
    std::fprintf(stderr, "%s: rank %d: %s\n", program, rank, f.what());
    cclCommAbort(comm);
    return 2;
  }
  const cclResult_t destroyed = cclCommDestroy(comm);
  if (destroyed != cclSuccess) {
    std::fprintf(stderr, "%s: rank %d: cclCommDestroy failed: %s\n", program, rank,
                 cclGetErrorString(destroyed));
    return 2;
  }
  return status;
}

}  // namespace ccl::perf
