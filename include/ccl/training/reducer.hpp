/**
 * @file training/reducer.hpp
 * @brief DDP's gradient reducer (PyTorch's Reducer is the model): buckets, an asynchronous
 * allreduce per bucket as soon as its last gradient is ready, no_sync accumulation, buckets
 * rebuilt from the observed ready order, gradients as views into the buckets, communication hooks.
 *
 * Part of the training layer (`#include <ccl/training.hpp>`, in libccl).
 *
 * @code
 * ccl::training::Reducer reducer(comm, specs);         // specs: (count, dtype) per parameter
 * for (step...) {
 *   reducer.zero_grad();
 *   // backward: for each parameter p as its gradient completes (last layer first):
 *   //   write it into reducer.grad_as<float>(p), then reducer.mark_ready(p);
 *   reducer.wait();                                    // every gradient is the ranks' average
 *   // optimizer step on the gradients
 * }
 * @endcode
 */
#ifndef CCL_TRAINING_REDUCER_HPP_
#define CCL_TRAINING_REDUCER_HPP_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

#include "../ccl.hpp"
#include "buckets.hpp"
#include "compression.hpp"

namespace ccl::training {

/// How a bucket travels. None: allreduce with cclAvg in the bucket's dtype. Fp16 / Bf16:
/// float32 buckets are cast to half / bfloat16, averaged so, and cast back (PyTorch's
/// fp16_compress_hook / bf16_compress_hook). Compress: float32 buckets go through `compressor`
/// (TopK, ScaledSign or OneBit, with error feedback per bucket). Other dtypes always go as None.
enum class CommHook { None, Fp16, Bf16, Compress };

struct ReducerOptions {
  /// Bucket limits in bytes, as DDP's [first_bucket_bytes, bucket_cap_mb · 2^20].
  std::vector<size_t> bucket_limits = {size_t{1} << 20, size_t{25} << 20};
  /// Rebuild the buckets from the ready order observed in the first synchronized iteration
  /// (rank 0's order, so every rank agrees), as DDP does.
  bool rebuild_buckets = true;
  CommHook hook = CommHook::None;
  /// The compressor of CommHook::Compress (shared so that the caller can read its bytes).
  std::shared_ptr<Compressor> compressor = nullptr;
};

/**
 * The reducer of one model replica on one rank. Buckets: assign_buckets(params, limits) in
 * reverse (the last parameters' gradients are ready first in a backward pass), rebuilt once.
 * A bucket's allreduce is queued on the reducer's own ccl stream as soon as all its gradients are
 * marked ready and every bucket before it is queued, so all ranks issue them in the same order;
 * it runs while the caller goes on with its backward pass. mark_ready may be called from any
 * thread. Every wait is bounded by the communicator's timeout (ccl::Error on failure).
 */
class Reducer {
 public:
  Reducer(ccl::Communicator& comm, std::span<const TensorSpec> params, ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// The gradient of `param`: its count elements inside its bucket, where the backward pass
  /// writes (or, across no_sync iterations, accumulates). Valid until the buckets are rebuilt
  /// (at the end of the first synchronized wait()), which carries the values over.
  void* grad(size_t param);
  template <class T>
  std::span<T> grad_as(size_t param) {
    check_type(param, sizeof(T));
    return {static_cast<T*>(grad(param)), params_[param].count};
  }
  /// Sets every gradient to zero (before a backward pass that writes rather than accumulates).
  void zero_grad();

  /// The gradient of `param` is complete for this backward pass. Throws std::logic_error when it
  /// was already marked in this iteration, std::out_of_range for an unknown index.
  void mark_ready(size_t param);
  /// After every parameter was marked: waits for the buckets' exchanges; each gradient is then the
  /// average over the ranks. Throws std::logic_error naming the parameters not marked.
  /// In a no_sync iteration it only starts the next iteration (nothing was sent).
  void wait();

  /// no_sync: while off, mark_ready only counts and gradients accumulate locally; the next
  /// synchronized iteration reduces the sum.
  void set_sync(bool on);
  bool sync() const { return sync_; }
  class NoSync {
   public:
    explicit NoSync(Reducer& r) : r_(r) { r_.set_sync(false); }
    ~NoSync() { r_.set_sync(true); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    Reducer& r_;
  };

  /// The buckets, in launch order, as parameter indices.
  const std::vector<std::vector<size_t>>& buckets() const { return bucket_params_; }
  /// Whether bucket b's exchange of this iteration was queued, and whether it completed (a
  /// query: it never waits).
  bool bucket_launched(size_t b) const;
  bool bucket_done(size_t b);
  /// Whether the buckets were rebuilt (after the first synchronized iteration).
  bool rebuilt() const { return rebuilt_; }
  /// Bytes this rank put on the wire in all exchanges so far (send buffers, see compression.hpp).
  uint64_t bytes_sent() const { return bytes_sent_; }
  /// Time spent inside wait() (the communication the backward pass did not hide), in total.
  std::chrono::nanoseconds wait_time() const { return wait_time_; }

 private:
  struct Bucket;
  void build(const std::vector<std::vector<size_t>>& layout);
  void launch_ready_buckets();  // under mutex_
  void launch(size_t bucket);
  void start_next_iteration();  // under mutex_
  void rebuild();
  void check_type(size_t param, size_t element_size) const;

  ccl::Communicator& comm_;
  std::vector<TensorSpec> params_;
  ReducerOptions options_;
  ccl::Stream stream_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<size_t> bucket_of_;    // per parameter
  std::vector<size_t> offset_of_;    // per parameter: byte offset in its bucket
  std::vector<bool> marked_;         // per parameter, this iteration
  std::vector<size_t> ready_order_;  // the first synchronized iteration's order
  size_t next_launch_ = 0;
  bool sync_ = true;
  bool rebuilt_ = false;
  uint64_t bytes_sent_ = 0;
  std::chrono::nanoseconds wait_time_{0};
};

}  // namespace ccl::training

#endif  // CCL_TRAINING_REDUCER_HPP_
