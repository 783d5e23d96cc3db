#include "fault_ops.h"

#include <cstdio>

namespace ccl::fault {

namespace {

// Never a valid result: every expected value below stays under 10^8.
constexpr int32_t kPoison = 0x5a5a5a5a;

// Counts (in int32 elements) that the size-varying operations cycle through: one element, a few
// cache lines, and two larger ones (the largest is 256 KiB per rank, 1 MiB in an allgather or
// alltoall at 4 ranks). Odd counts, so that no algorithm gets evenly divisible chunks.
constexpr size_t kCounts[] = {1, 301, 20011, 65537};
constexpr size_t kMaxCount = 65537;

size_t count_for(uint64_t iter, size_t salt) { return kCounts[(iter + salt) % 4]; }

int32_t wave(size_t j, uint64_t iter, int period) {
  return static_cast<int32_t>((j + iter) % static_cast<uint64_t>(period));
}

// Compares out[0..n) with want(j); describes the first mismatch and how many there were.
template <typename Want>
std::string compare(const char* what, size_t count, const std::vector<int32_t>& out, size_t n,
                    Want want) {
  size_t wrong = 0;
  size_t first = 0;
  for (size_t j = 0; j < n; ++j) {
    if (out[j] != want(j)) {
      if (wrong++ == 0) first = j;
    }
  }
  if (wrong == 0) return "";
  char buf[256];
  snprintf(buf, sizeof(buf),
           "%s count %zu: %zu of %zu elements wrong, first at %zu: got %d want %d", what, count,
           wrong, n, first, out[first], want(first));
  return buf;
}

class AllReduceOp : public Op {
 public:
  AllReduceOp(int rank, int nranks, size_t count)
      : rank_(rank), nranks_(nranks), count_(count), in_(count), out_(count) {}
  const char* name() const override { return "allreduce"; }
  void prepare(uint64_t iter) override {
    iter_ = iter;
    for (size_t j = 0; j < count_; ++j) in_[j] = (rank_ + 1) * (wave(j, iter, 1000) + 1);
    out_.assign(count_, kPoison);
  }
  cclResult_t issue(cclComm_t comm, cclStream_t stream) override {
    return cclAllReduce(in_.data(), out_.data(), count_, cclInt32, cclSum, comm, stream);
  }
  std::string verify() const override {
    const int32_t ranks_sum = nranks_ * (nranks_ + 1) / 2;
    return compare("allreduce", count_, out_, count_,
                   [&](size_t j) { return ranks_sum * (wave(j, iter_, 1000) + 1); });
  }

 private:
  int rank_, nranks_;
  size_t count_;
  uint64_t iter_ = 0;
  std::vector<int32_t> in_, out_;
};

class BroadcastOp : public Op {
 public:
  explicit BroadcastOp(int nranks) : nranks_(nranks), in_(kMaxCount), out_(kMaxCount) {}
  const char* name() const override { return "broadcast"; }
  void prepare(uint64_t iter) override {
    iter_ = iter;
    count_ = count_for(iter, 1);
    root_ = static_cast<int>(iter % static_cast<uint64_t>(nranks_));
    for (size_t j = 0; j < count_; ++j) in_[j] = expected(j);
    out_.assign(count_, kPoison);
  }
  cclResult_t issue(cclComm_t comm, cclStream_t stream) override {
    return cclBroadcast(in_.data(), out_.data(), count_, cclInt32, root_, comm, stream);
  }
  std::string verify() const override {
    return compare("broadcast", count_, out_, count_, [&](size_t j) { return expected(j); });
  }

 private:
  int32_t expected(size_t j) const { return root_ * 1000003 + wave(j * 7, iter_, 1000000); }
  int nranks_;
  int root_ = 0;
  size_t count_ = 0;
  uint64_t iter_ = 0;
  std::vector<int32_t> in_, out_;
};

class AllGatherOp : public Op {
 public:
  AllGatherOp(int rank, int nranks)
      : rank_(rank), nranks_(nranks), in_(kMaxCount), out_(kMaxCount * nranks) {}
  const char* name() const override { return "allgather"; }
  void prepare(uint64_t iter) override {
    iter_ = iter;
    count_ = count_for(iter, 2);
    for (size_t j = 0; j < count_; ++j) in_[j] = value(rank_, j);
    out_.assign(count_ * nranks_, kPoison);
  }
  cclResult_t issue(cclComm_t comm, cclStream_t stream) override {
    return cclAllGather(in_.data(), out_.data(), count_, cclInt32, comm, stream);
  }
  std::string verify() const override {
    return compare("allgather", count_, out_, count_ * nranks_,
                   [&](size_t j) { return value(static_cast<int>(j / count_), j % count_); });
  }

 private:
  int32_t value(int from, size_t j) const { return from * 1000003 + wave(j, iter_, 1000000); }
  int rank_, nranks_;
  size_t count_ = 0;
  uint64_t iter_ = 0;
  std::vector<int32_t> in_, out_;
};

class ReduceScatterOp : public Op {
 public:
  ReduceScatterOp(int rank, int nranks)
      : rank_(rank), nranks_(nranks), in_(kMaxCount * nranks), out_(kMaxCount) {}
  const char* name() const override { return "reducescatter"; }
  void prepare(uint64_t iter) override {
    iter_ = iter;
    count_ = count_for(iter, 3);
    for (int block = 0; block < nranks_; ++block) {
      for (size_t j = 0; j < count_; ++j) {
        in_[block * count_ + j] = (rank_ + 1) * (block + 1) + wave(j, iter, 1000);
      }
    }
    out_.assign(count_, kPoison);
  }
  cclResult_t issue(cclComm_t comm, cclStream_t stream) override {
    return cclReduceScatter(in_.data(), out_.data(), count_, cclInt32, cclSum, comm, stream);
  }
  std::string verify() const override {
    const int32_t ranks_sum = nranks_ * (nranks_ + 1) / 2;
    return compare("reducescatter", count_, out_, count_, [&](size_t j) {
      return (rank_ + 1) * ranks_sum + nranks_ * wave(j, iter_, 1000);
    });
  }

 private:
  int rank_, nranks_;
  size_t count_ = 0;
  uint64_t iter_ = 0;
  std::vector<int32_t> in_, out_;
};

class AlltoAllOp : public Op {
 public:
  AlltoAllOp(int rank, int nranks)
      : rank_(rank), nranks_(nranks), in_(kMaxCount * nranks), out_(kMaxCount * nranks) {}
  const char* name() const override { return "alltoall"; }
  void prepare(uint64_t iter) override {
    iter_ = iter;
    count_ = count_for(iter, 0);
    for (int to = 0; to < nranks_; ++to) {
      for (size_t j = 0; j < count_; ++j) in_[to * count_ + j] = value(rank_, to, j);
    }
    out_.assign(count_ * nranks_, kPoison);
  }
  cclResult_t issue(cclComm_t comm, cclStream_t stream) override {
    return cclAlltoAll(in_.data(), out_.data(), count_, cclInt32, comm, stream);
  }
  std::string verify() const override {
    return compare("alltoall", count_, out_, count_ * nranks_, [&](size_t j) {
      return value(static_cast<int>(j / count_), rank_, j % count_);
    });
  }

 private:
  int32_t value(int from, int to, size_t j) const {
    return from * 1000000 + to * 10000 + wave(j, iter_, 10000);
  }
  int rank_, nranks_;
  size_t count_ = 0;
  uint64_t iter_ = 0;
  std::vector<int32_t> in_, out_;
};

class BarrierOp : public Op {
 public:
  const char* name() const override { return "barrier"; }
  void prepare(uint64_t) override {}
  cclResult_t issue(cclComm_t comm, cclStream_t stream) override {
    return cclBarrier(comm, stream);
  }
  std::string verify() const override { return ""; }
};

// Each rank sends to rank+1 and receives from rank-1 inside one group (outside a group, a ring
// of blocking sends would deadlock).
class RingOp : public Op {
 public:
  RingOp(int rank, int nranks) : rank_(rank), nranks_(nranks), in_(kMaxCount), out_(kMaxCount) {}
  const char* name() const override { return "sendrecv-ring"; }
  void prepare(uint64_t iter) override {
    iter_ = iter;
    count_ = count_for(iter, 1);
    for (size_t j = 0; j < count_; ++j) in_[j] = value(rank_, j);
    out_.assign(count_, kPoison);
  }
  cclResult_t issue(cclComm_t comm, cclStream_t stream) override {
    const int next = (rank_ + 1) % nranks_;
    const int prev = (rank_ + nranks_ - 1) % nranks_;
    cclResult_t r = cclGroupStart();
    if (r != cclSuccess) return r;
    cclResult_t send = cclSend(in_.data(), count_, cclInt32, next, comm, stream);
    cclResult_t recv = cclRecv(out_.data(), count_, cclInt32, prev, comm, stream);
    // The group is always closed, so that a failed call does not leave it open for the next.
    cclResult_t end = cclGroupEnd();
    if (send != cclSuccess) return send;
    if (recv != cclSuccess) return recv;
    return end;
  }
  std::string verify() const override {
    const int prev = (rank_ + nranks_ - 1) % nranks_;
    return compare("sendrecv-ring", count_, out_, count_, [&](size_t j) { return value(prev, j); });
  }

 private:
  int32_t value(int from, size_t j) const { return from * 1000003 + wave(j * 3, iter_, 1000000); }
  int rank_, nranks_;
  size_t count_ = 0;
  uint64_t iter_ = 0;
  std::vector<int32_t> in_, out_;
};

}  // namespace

std::vector<std::unique_ptr<Op>> make_mixed_ops(int rank, int nranks) {
  std::vector<std::unique_ptr<Op>> ops;
  // 8 B, about 1 KiB, 64 KiB and 1 MiB.
  for (size_t count : {size_t{2}, size_t{257}, size_t{16387}, size_t{262147}}) {
    ops.push_back(std::make_unique<AllReduceOp>(rank, nranks, count));
  }
  ops.push_back(std::make_unique<BroadcastOp>(nranks));
  ops.push_back(std::make_unique<AllGatherOp>(rank, nranks));
  ops.push_back(std::make_unique<ReduceScatterOp>(rank, nranks));
  ops.push_back(std::make_unique<AlltoAllOp>(rank, nranks));
  ops.push_back(std::make_unique<BarrierOp>());
  ops.push_back(std::make_unique<RingOp>(rank, nranks));
  return ops;
}

}  // namespace ccl::fault
