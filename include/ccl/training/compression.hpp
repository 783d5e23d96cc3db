/**
 * @file training/compression.hpp
 * @brief Gradient compression with error feedback: TopK, scaled sign, and the compressed
 * allreduce of 1-bit Adam (DeepSpeed), each reporting the bytes it put on the wire.
 *
 * Part of the training layer (`#include <ccl/training.hpp>`, in libccl).
 *
 * Error feedback (Seide et al. 2014; Karimireddy et al. 2019): per tensor the compressor keeps
 * what compression dropped, e. Each exchange compresses p = g + e into Δ = C(p) and keeps
 * e' = p − Δ, so nothing is lost for good, only delayed. The result every rank gets is the
 * average of the ranks' Δ (OneBit: its two-stage version, below).
 *
 * "Bytes on the wire" counts, per rank, the send buffers of the collectives it joined: what it
 * contributed to the exchange, as nccl-tests' "size" counts a call. An uncompressed float32
 * allreduce of d elements counts 4d.
 */
#ifndef CCL_TRAINING_COMPRESSION_HPP_
#define CCL_TRAINING_COMPRESSION_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../ccl.hpp"

namespace ccl::training {

/**
 * A compressor of float32 gradients. Tensors are told apart by a `key` of the caller's choosing
 * (a bucket or parameter index): each key has its own error buffers, and every rank must use the
 * same key for the same tensor, with the same element count, in the same order.
 *
 * Not thread-safe: one exchange at a time per compressor, except that several keys may be between
 * start() and finish() at once (the reducer starts one per bucket and finishes them in order).
 */
class Compressor {
 public:
  virtual ~Compressor() = default;

  /// Compresses `grad` and queues its exchange on `stream` (nothing: runs it now). `grad` may be
  /// changed or freed after start returns: the compressor keeps its own buffers.
  void start(ccl::Communicator& comm, size_t key, std::span<const float> grad,
             ccl::StreamRef stream = {});
  /// Once the exchange start() queued has completed (its stream synchronized): writes the
  /// average into `grad` (as many elements as start had). May run more collectives on `comm`,
  /// blocking (OneBit's second stage). Throws std::logic_error without a pending start for `key`.
  void finish(ccl::Communicator& comm, size_t key, std::span<float> grad);
  /// start() then finish(), blocking: `grad` becomes the compressed average over the ranks.
  void all_reduce(ccl::Communicator& comm, size_t key, std::span<float> grad);

  /// Bytes this rank put on the wire since construction (see the file comment).
  uint64_t bytes_sent() const { return bytes_sent_; }
  /// Error feedback on (default) or off (e stays 0: the ablation the tests compare against).
  void set_error_feedback(bool on) { error_feedback_ = on; }
  bool error_feedback() const { return error_feedback_; }
  /// The worker error buffer of `key` (empty before its first exchange).
  std::span<const float> error(size_t key) const;
  /// Drops every key's error buffers (the reducer does when it rebuilds its buckets, whose keys
  /// then name other tensors). Throws std::logic_error while an exchange is pending.
  virtual void forget();
  /// A short name with the parameters, e.g. "topk:0.01".
  virtual std::string name() const = 0;

 protected:
  /// What one exchange keeps between start and finish. Kept per key after finish, so that the
  /// next exchange reuses its buffers (a fresh buffer costs its page faults every step).
  struct Pending {
    bool active = false;
    size_t count = 0;
    std::vector<uint8_t> send, recv;  // the queued collectives' buffers (they must outlive them)
    std::vector<uint8_t> send2, recv2;
  };
  /// p = g + e is in `p` (e already cleared to be rewritten): compress it, write e' = p − Δ into
  /// `error` (when error feedback is on, else leave it 0), fill `pending`'s buffers and queue the
  /// collectives on `stream`; return the bytes sent.
  virtual uint64_t compress_and_queue(ccl::Communicator& comm, size_t key, std::span<float> p,
                                      std::span<float> error, Pending& pending,
                                      ccl::StreamRef stream) = 0;
  /// Writes the average into `out` from `pending`'s received buffers; returns the bytes sent by
  /// any further collectives.
  virtual uint64_t decompress(ccl::Communicator& comm, size_t key, Pending& pending,
                              std::span<float> out) = 0;

 private:
  bool error_feedback_ = true;
  uint64_t bytes_sent_ = 0;
  std::unordered_map<size_t, std::vector<float>> errors_;
  std::unordered_map<size_t, Pending> pending_;
  std::vector<float> p_;  // scratch: g + e
};

/// TopK's settings: the fraction of elements kept (k = max(1, round(ratio·d))), and the value
/// type on the wire (float32, or float16 to halve it). Indices travel as uint32 (d < 2^32).
struct TopKOptions {
  double ratio = 0.01;
  bool fp16_values = false;
};

/**
 * TopK sparsification (Aji & Heafield 2017; Lin et al., Deep Gradient Compression): Δ keeps the
 * k largest |p| (ties: the lower index), every rank's (index, value) pairs are allgathered, and
 * the result is their sum scattered into zeros, divided by the ranks. Sends 4k + (4 or 2)k bytes.
 */
class TopK final : public Compressor {
 public:
  explicit TopK(TopKOptions options = {});
  std::string name() const override;
  size_t k_for(size_t count) const;

 private:
  uint64_t compress_and_queue(ccl::Communicator&, size_t, std::span<float>, std::span<float>,
                              Pending&, ccl::StreamRef) override;
  uint64_t decompress(ccl::Communicator&, size_t, Pending&, std::span<float>) override;
  TopKOptions options_;
  std::vector<float> magnitudes_, selection_;  // scratch, reused across exchanges
  std::vector<uint32_t> indices_;
};

/**
 * Scaled sign (signSGD with a scale, as Karimireddy et al.'s EF-SignSGD): Δ = ‖p‖₁/d · sign(p)
 * (sign 0 counts as +), one bit per element, packed; every rank's (scale, bits) is allgathered
 * and the result is the average of their Δ. Sends 4 + ⌈d/8⌉ bytes.
 */
class ScaledSign final : public Compressor {
 public:
  std::string name() const override { return "sign"; }

 private:
  uint64_t compress_and_queue(ccl::Communicator&, size_t, std::span<float>, std::span<float>,
                              Pending&, ccl::StreamRef) override;
  uint64_t decompress(ccl::Communicator&, size_t, Pending&, std::span<float>) override;
};

/**
 * The compressed allreduce of 1-bit Adam (Tang et al. 2021; DeepSpeed's compressed_allreduce),
 * with a worker and a server error buffer. d is padded with zeros to a multiple of 8·n.
 * 1. Worker: p = g + e_w; s = ‖p‖₂/√d; e_w = p − s·sign(p); the packed signs are cut into n
 *    chunks, chunk j goes to rank j (alltoall), and s to everyone (allgather).
 * 2. Server, rank j for chunk j: a = the ranks' s·sign averaged; q = a + e_s;
 *    s_j = ‖q‖₂/√(d/n); e_s = q − s_j·sign(q); its packed signs and s_j are allgathered.
 * 3. Everyone: chunk j of the result is s_j·sign.
 * Sends ⌈d/8⌉ + 4 bytes in stage 1 and d/(8n) + 4 in stage 2.
 */
class OneBit final : public Compressor {
 public:
  std::string name() const override { return "onebit"; }
  /// The server error buffer this rank keeps for `key` (its chunk), empty before the first use.
  std::span<const float> server_error(size_t key) const;
  void forget() override;

 private:
  uint64_t compress_and_queue(ccl::Communicator&, size_t, std::span<float>, std::span<float>,
                              Pending&, ccl::StreamRef) override;
  uint64_t decompress(ccl::Communicator&, size_t, Pending&, std::span<float>) override;
  std::unordered_map<size_t, std::vector<float>> server_errors_;
  std::vector<float> full_, q_;  // scratch, reused across exchanges
  std::vector<uint8_t> server_send_, server_all_;
};

/// A compressor from its name: "topk:R" (R the ratio), "topk16:R" (fp16 values), "sign",
/// "onebit". Throws std::invalid_argument naming the text for anything else.
std::unique_ptr<Compressor> make_compressor(std::string_view spec);

}  // namespace ccl::training

#endif  // CCL_TRAINING_COMPRESSION_HPP_
