// DDP's reducer on ccl streams and events: buckets queued in order as their gradients complete,
// averaged with cclAvg (or through a hook), rebuilt once from rank 0's observed ready order.
#include "ccl/training/reducer.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "ddp/half_cast.h"
#include "ddp/index_list.h"

namespace ccl::training {

struct Reducer::Bucket {
  cclDataType_t dtype = cclFloat32;
  size_t count = 0;               // elements
  std::vector<uint64_t> storage;  // the gradients, 8-byte aligned
  std::vector<uint16_t> cast;     // Fp16 / Bf16: the bucket on the wire
  size_t pending = 0;             // parameters not yet marked this iteration
  size_t params = 0;
  bool launched = false;
  ccl::Event done;
  void* data() { return storage.data(); }
};

Reducer::Reducer(ccl::Communicator& comm, std::span<const TensorSpec> params,
                 ReducerOptions options)
    : comm_(comm), params_(params.begin(), params.end()), options_(std::move(options)) {
  if (options_.bucket_limits.empty()) {
    throw std::invalid_argument("ccl::training::Reducer: bucket_limits is empty");
  }
  if (options_.hook == CommHook::Compress && !options_.compressor) {
    throw std::invalid_argument("ccl::training::Reducer: CommHook::Compress without a compressor");
  }
  for (const TensorSpec& p : params_) (void)dtype_size(p.dtype);  // throws for a bad dtype
  auto layout = assign_buckets(params_, options_.bucket_limits);
  std::reverse(layout.begin(), layout.end());
  build(layout);
}

Reducer::~Reducer() {
  // The stream's destructor waits for queued exchanges, whose buffers are the buckets: it must run
  // before the buckets go (members are destroyed in reverse order; make it explicit).
  try {
    stream_.synchronize();
  } catch (...) {  // a failed exchange was (or would have been) reported by wait()
  }
}

void Reducer::build(const std::vector<std::vector<size_t>>& layout) {
  std::vector<std::unique_ptr<Bucket>> buckets;
  std::vector<size_t> bucket_of(params_.size()), offset_of(params_.size());
  for (size_t b = 0; b < layout.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    bucket->dtype = params_[layout[b].front()].dtype;
    size_t bytes = 0;
    for (const size_t p : layout[b]) {
      bucket_of[p] = b;
      offset_of[p] = bytes;
      bytes += params_[p].count * dtype_size(params_[p].dtype);
      bucket->count += params_[p].count;
    }
    bucket->storage.assign((bytes + 7) / 8, 0);
    bucket->params = bucket->pending = layout[b].size();
    buckets.push_back(std::move(bucket));
  }
  // Carry the gradients over from the old layout (a rebuild keeps what the caller accumulated).
  for (size_t p = 0; p < params_.size() && !buckets_.empty(); ++p) {
    std::memcpy(static_cast<char*>(buckets[bucket_of[p]]->data()) + offset_of[p], grad(p),
                params_[p].count * dtype_size(params_[p].dtype));
  }
  buckets_ = std::move(buckets);
  bucket_params_ = layout;
  bucket_of_ = std::move(bucket_of);
  offset_of_ = std::move(offset_of);
  marked_.assign(params_.size(), false);
}

void* Reducer::grad(size_t param) {
  if (param >= params_.size()) {
    throw std::out_of_range("ccl::training::Reducer: parameter " + std::to_string(param) + " of " +
                            std::to_string(params_.size()));
  }
  return static_cast<char*>(buckets_[bucket_of_[param]]->data()) + offset_of_[param];
}

void Reducer::check_type(size_t param, size_t element_size) const {
  if (param < params_.size() && dtype_size(params_[param].dtype) != element_size) {
    throw std::invalid_argument("ccl::training::Reducer: parameter " + std::to_string(param) +
                                " has elements of " +
                                std::to_string(dtype_size(params_[param].dtype)) + " bytes, not " +
                                std::to_string(element_size));
  }
}

void Reducer::zero_grad() {
  std::lock_guard lock(mutex_);
  for (auto& b : buckets_) std::fill(b->storage.begin(), b->storage.end(), 0);
}

void Reducer::set_sync(bool on) {
  std::lock_guard lock(mutex_);
  if (on == sync_) return;
  if (std::find(marked_.begin(), marked_.end(), true) != marked_.end()) {
    throw std::logic_error("ccl::training::Reducer: set_sync in the middle of a backward pass");
  }
  sync_ = on;
}

void Reducer::mark_ready(size_t param) {
  std::lock_guard lock(mutex_);
  if (param >= params_.size()) {
    throw std::out_of_range("ccl::training::Reducer::mark_ready: parameter " +
                            std::to_string(param) + " of " + std::to_string(params_.size()));
  }
  if (!sync_) return;  // no_sync: the gradient stays local and accumulates
  if (marked_[param]) {
    throw std::logic_error("ccl::training::Reducer::mark_ready: parameter " +
                           std::to_string(param) + " was already marked in this iteration");
  }
  marked_[param] = true;
  if (options_.rebuild_buckets && !rebuilt_) ready_order_.push_back(param);
  if (--buckets_[bucket_of_[param]]->pending == 0) launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  // In bucket order only: a ready bucket waits for the ones before it, so every rank queues the
  // same collectives in the same order whatever order its gradients completed in.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
    launch(next_launch_);
    ++next_launch_;
  }
}

void Reducer::launch(size_t index) {
  Bucket& b = *buckets_[index];
  const bool float32 = b.dtype == cclFloat32;
  const auto* f = static_cast<const float*>(b.data());
  if (float32 && (options_.hook == CommHook::Fp16 || options_.hook == CommHook::Bf16)) {
    const bool fp16 = options_.hook == CommHook::Fp16;
    b.cast.resize(b.count);
    (fp16 ? half_cast::to_fp16 : half_cast::to_bf16)(f, b.cast.data(), b.count);
    ccl::detail::check(
        cclAllReduce(b.cast.data(), b.cast.data(), b.count, fp16 ? cclFloat16 : cclBfloat16, cclAvg,
                     comm_.get(), stream_.get()),
        "cclAllReduce", comm_.get());
    bytes_sent_ += b.count * sizeof(uint16_t);
  } else if (float32 && options_.hook == CommHook::Compress) {
    const uint64_t before = options_.compressor->bytes_sent();
    options_.compressor->start(comm_, index, std::span<const float>(f, b.count), stream_);
    bytes_sent_ += options_.compressor->bytes_sent() - before;
  } else {
    ccl::detail::check(
        cclAllReduce(b.data(), b.data(), b.count, b.dtype, cclAvg, comm_.get(), stream_.get()),
        "cclAllReduce", comm_.get());
    bytes_sent_ += b.count * dtype_size(b.dtype);
  }
  b.done.record(stream_);
  b.launched = true;
}

bool Reducer::bucket_launched(size_t b) const {
  return b < buckets_.size() && buckets_[b]->launched;
}

bool Reducer::bucket_done(size_t b) {
  return b < buckets_.size() && buckets_[b]->launched && buckets_[b]->done.query();
}

void Reducer::wait() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  if (!sync_) return;
  if (next_launch_ < buckets_.size()) {
    std::vector<size_t> missing;
    for (size_t p = 0; p < params_.size(); ++p) {
      if (!marked_[p]) missing.push_back(p);
    }
    stream_.synchronize();  // what was queued must not outlive this call's state
    start_next_iteration();
    ready_order_.clear();
    throw std::logic_error("ccl::training::Reducer::wait: parameters not marked ready: " +
                           index_list(missing));
  }
  stream_.synchronize();
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = *buckets_[i];
    if (b.dtype != cclFloat32) continue;
    auto* f = static_cast<float*>(b.data());
    if (options_.hook == CommHook::Fp16) {
      half_cast::from_fp16(b.cast.data(), f, b.count);
    } else if (options_.hook == CommHook::Bf16) {
      half_cast::from_bf16(b.cast.data(), f, b.count);
    } else if (options_.hook == CommHook::Compress) {
      const uint64_t before = options_.compressor->bytes_sent();
      options_.compressor->finish(comm_, i, std::span<float>(f, b.count));
      bytes_sent_ += options_.compressor->bytes_sent() - before;
    }
  }
  start_next_iteration();
  if (options_.rebuild_buckets && !rebuilt_) rebuild();
  wait_time_ += std::chrono::steady_clock::now() - start;
}

void Reducer::start_next_iteration() {
  for (auto& b : buckets_) {
    b->pending = b->params;
    b->launched = false;
  }
  next_launch_ = 0;
  std::fill(marked_.begin(), marked_.end(), false);
}

void Reducer::rebuild() {
  // Rank 0's order for everyone (as DDP's sync of the rebuilt bucket indices): ranks whose
  // gradients completed in another order must still build the same buckets.
  std::vector<uint64_t> order(ready_order_.begin(), ready_order_.end());
  comm_.broadcast(std::span<uint64_t>(order), 0);
  std::vector<size_t> ord(order.begin(), order.end());
  build(assign_buckets(params_, options_.bucket_limits, ord));
  if (options_.compressor) options_.compressor->forget();  // its error buffers were per old bucket
  rebuilt_ = true;
  ready_order_.clear();
}

}  // namespace ccl::training
