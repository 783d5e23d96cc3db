// The ZeRO engine: per unit, a working copy (whole), a float32 master slice, a whole gradient and
// its averaged slice; reduce-scatters and all-gathers queued on the engine's stream in the same
// order on every rank. 16-bit precisions cast on the calling thread before an exchange and after
// its wait (the stream runs collectives only).
#include "ccl/training/zero.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ddp/half_cast.h"
#include "ddp/index_list.h"
#include "zero/unit_state.h"

namespace ccl::training {

namespace {

// std::vector::clear keeps the allocation; ZeRO's point is to give it back.
template <class T>
void free_vector(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

cclDataType_t wire_type(ZeroPrecision p) {
  return p == ZeroPrecision::Fp16   ? cclFloat16
         : p == ZeroPrecision::Bf16 ? cclBfloat16
                                    : cclFloat32;
}

// Bytes of one value on the wire.
size_t wire_size(ZeroPrecision p) {
  return p == ZeroPrecision::Fp32 ? sizeof(float) : sizeof(uint16_t);
}

void to_wire(ZeroPrecision p, const float* in, uint16_t* out, size_t n) {
  (p == ZeroPrecision::Fp16 ? half_cast::to_fp16 : half_cast::to_bf16)(in, out, n);
}

void from_wire(ZeroPrecision p, const uint16_t* in, float* out, size_t n) {
  (p == ZeroPrecision::Fp16 ? half_cast::from_fp16 : half_cast::from_bf16)(in, out, n);
}

}  // namespace

Zero::Zero(Communicator& dp, std::span<const ZeroParam> params,
           std::unique_ptr<Optimizer> optimizer, ZeroOptions options)
    : dp_(dp),
      params_(params.begin(), params.end()),
      optimizer_(std::move(optimizer)),
      options_(options) {
  if (options_.stage < 1 || options_.stage > 3) {
    throw std::invalid_argument("ccl::training::Zero: stage " + std::to_string(options_.stage) +
                                " must be 1, 2 or 3");
  }
  if (options_.reductions_in_flight < 1) {
    throw std::invalid_argument("ccl::training::Zero: reductions_in_flight " +
                                std::to_string(options_.reductions_in_flight) +
                                " must be at least 1");
  }
  if (options_.prefetch < 0) {
    throw std::invalid_argument("ccl::training::Zero: prefetch " +
                                std::to_string(options_.prefetch) + " must be at least 0");
  }
  if (!optimizer_) throw std::invalid_argument("ccl::training::Zero: optimizer is null");
  if (params_.empty()) throw std::invalid_argument("ccl::training::Zero: no parameters");
  const int n = dp_.size();
  const int rank = dp_.rank();
  units_ = zero_layout(params_, n);
  const bool half = options_.precision != ZeroPrecision::Fp32;
  for (const ZeroUnitLayout& u : units_) {
    auto s = std::make_unique<UnitState>();
    const size_t padded = u.shard * static_cast<size_t>(n);
    if (options_.stage < 3) s->working.assign(padded, 0.0f);
    // The master slice is the working copy's own slice when both are float32 and whole.
    if (options_.stage == 3 || half) s->master.assign(u.shard, 0.0f);
    if (options_.stage == 1) {
      s->grad.assign(padded, 0.0f);  // persistent: its own slice is the reduced gradient's
    } else {
      s->grad_shard.assign(u.shard, 0.0f);
    }
    s->marked.assign(u.params, false);
    s->pending = u.params;
    float* master = s->master_slice(static_cast<size_t>(rank) * u.shard);
    for (const ZeroPiece& piece : zero_pieces(u, rank)) {
      pieces_.push_back(
          {.param = master + piece.shard_offset,
           .grad = s->grad_slice(static_cast<size_t>(rank) * u.shard) + piece.shard_offset,
           .count = piece.count,
           .exclude = params_[piece.param].exclude,
           .tensor = piece.param});
    }
    state_.push_back(std::move(s));
  }
  track_memory();
}

Zero::~Zero() {
  // Queued exchanges write into the units' buffers: wait for them before the buffers go.
  try {
    stream_.synchronize();
  } catch (...) {  // reported (or it would have been) by the call that waited
  }
}

Zero::UnitState& Zero::unit_of(size_t param, const char* what) {
  if (param >= params_.size()) {
    throw std::out_of_range(std::string("ccl::training::Zero::") + what + ": parameter " +
                            std::to_string(param) + " is outside [0, " +
                            std::to_string(params_.size()) + ")");
  }
  return *state_[params_[param].unit];
}

void Zero::load_full(size_t param, std::span<const float> values) {
  UnitState& s = unit_of(param, "load_full");
  const ZeroParam& p = params_[param];
  if (values.size() != p.count) {
    throw std::invalid_argument("ccl::training::Zero::load_full: parameter " +
                                std::to_string(param) + " has " + std::to_string(p.count) +
                                " values, not " + std::to_string(values.size()));
  }
  stream_.synchronize();  // a queued all-gather may write the working copy
  const ZeroUnitLayout& u = units_[p.unit];
  const size_t offset = u.offsets[param - u.first_param];
  if (!s.working.empty()) {
    std::copy(values.begin(), values.end(),
              s.working.begin() + static_cast<std::ptrdiff_t>(offset));
    if (options_.precision != ZeroPrecision::Fp32) {  // the working copy is what the wire carries
      std::vector<uint16_t> h(values.size());
      to_wire(options_.precision, values.data(), h.data(), h.size());
      from_wire(options_.precision, h.data(), s.working.data() + offset, h.size());
    }
  }
  if (!s.master.empty()) {
    for (const ZeroPiece& piece : zero_pieces(u, dp_.rank())) {
      if (piece.param != param) continue;
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(piece.param_offset), piece.count,
                  s.master.begin() + static_cast<std::ptrdiff_t>(piece.shard_offset));
    }
  }
}

void Zero::launch_gather(size_t unit) {
  UnitState& s = *state_[unit];
  const ZeroUnitLayout& u = units_[unit];
  const size_t rank = static_cast<size_t>(dp_.rank());
  const size_t padded = u.shard * static_cast<size_t>(dp_.size());
  // Stage 1 and 2 keep the working copy (whose own slice may be the master: never clear it).
  if (s.working.empty()) s.working.assign(padded, 0.0f);
  const float* master = s.master_slice(rank * u.shard);
  void* buffer = nullptr;
  if (options_.precision == ZeroPrecision::Fp32) {
    if (!s.master.empty()) std::copy_n(master, u.shard, s.working.data() + rank * u.shard);
    buffer = s.working.data();
  } else {
    s.wire.assign(padded, 0);
    to_wire(options_.precision, master, s.wire.data() + rank * u.shard, u.shard);
    buffer = s.wire.data();
  }
  const size_t element = wire_size(options_.precision);
  char* bytes = static_cast<char*>(buffer);
  detail::check(cclAllGather(bytes + rank * u.shard * element, bytes, u.shard,
                             wire_type(options_.precision), dp_.get(), stream_.get()),
                "cclAllGather", dp_.get());
  s.gathered.record(stream_);
  s.gathering = true;
  bytes_sent_ += u.shard * element;
  track_memory();
}

void Zero::wait_gather(size_t unit) {
  UnitState& s = *state_[unit];
  if (!s.gathering) return;
  s.gathered.synchronize();
  s.gathering = false;
  if (!s.wire.empty()) {
    from_wire(options_.precision, s.wire.data(), s.working.data(), s.working.size());
    free_vector(s.wire);
  }
}

void Zero::check_unit(size_t unit, const char* what) const {
  if (unit >= units_.size()) {
    throw std::out_of_range(std::string("ccl::training::Zero::") + what + ": unit " +
                            std::to_string(unit) + " is outside [0, " +
                            std::to_string(units_.size()) + ")");
  }
}

void Zero::gather(size_t unit) {
  check_unit(unit, "gather");
  if (options_.stage < 3) return;
  UnitState& s = *state_[unit];
  gather_order_.push_back(unit);
  if (s.working.empty() && !s.gathering) launch_gather(unit);
  // Prefetch: the units that followed this call in the previous iteration, if it went alike.
  const size_t position = gather_order_.size() - 1;
  if (position < last_order_.size() && last_order_[position] == unit) {
    for (int k = 1;
         k <= options_.prefetch && position + static_cast<size_t>(k) < last_order_.size(); ++k) {
      const size_t next = last_order_[position + static_cast<size_t>(k)];
      if (state_[next]->working.empty()) launch_gather(next);
    }
  }
  wait_gather(unit);
}

void Zero::release(size_t unit) {
  check_unit(unit, "release");
  if (options_.stage < 3) return;
  UnitState& s = *state_[unit];
  wait_gather(unit);  // a prefetch in flight writes the buffer
  free_vector(s.working);
}

std::span<float> Zero::param(size_t param) {
  UnitState& s = unit_of(param, "param");
  const ZeroParam& p = params_[param];
  if (s.working.empty() || s.gathering) {
    throw std::logic_error("ccl::training::Zero::param: parameter " + std::to_string(param) +
                           " (unit " + std::to_string(p.unit) + ") is not gathered: call gather(" +
                           std::to_string(p.unit) + ") first");
  }
  const ZeroUnitLayout& u = units_[p.unit];
  return {s.working.data() + u.offsets[param - u.first_param], p.count};
}

std::span<float> Zero::grad(size_t param) {
  UnitState& s = unit_of(param, "grad");
  const ZeroParam& p = params_[param];
  const ZeroUnitLayout& u = units_[p.unit];
  if (s.reducing || (options_.stage > 1 && s.marked[param - u.first_param])) {
    throw std::logic_error("ccl::training::Zero::grad: parameter " + std::to_string(param) +
                           " was already marked ready this iteration");
  }
  if (s.grad.empty()) {
    s.grad.assign(u.shard * static_cast<size_t>(dp_.size()), 0.0f);
    track_memory();
  }
  return {s.grad.data() + u.offsets[param - u.first_param], p.count};
}

void Zero::launch_reduce(size_t unit) {
  UnitState& s = *state_[unit];
  const ZeroUnitLayout& u = units_[unit];
  const size_t padded = u.shard * static_cast<size_t>(dp_.size());
  if (s.grad.empty()) s.grad.assign(padded, 0.0f);  // marked without a gradient written: zeros
  const void* send = s.grad.data();
  void* recv = s.grad_slice(static_cast<size_t>(dp_.rank()) * u.shard);  // stage 1: in place
  if (options_.precision != ZeroPrecision::Fp32) {
    s.grad_wire.resize(padded);
    s.shard_wire.resize(u.shard);
    to_wire(options_.precision, s.grad.data(), s.grad_wire.data(), padded);
    send = s.grad_wire.data();
    recv = s.shard_wire.data();
  }
  detail::check(cclReduceScatter(send, recv, u.shard, wire_type(options_.precision), cclAvg,
                                 dp_.get(), stream_.get()),
                "cclReduceScatter", dp_.get());
  s.reduced.record(stream_);
  s.reducing = true;
  reducing_.push_back(unit);
  bytes_sent_ += padded * wire_size(options_.precision);
  track_memory();
}

// The stream runs the reduce-scatters in launch order, so the oldest is the first to finish.
void Zero::finish_oldest_reduce() {
  const size_t unit = reducing_.front();
  reducing_.pop_front();
  UnitState& s = *state_[unit];
  s.reduced.synchronize();
  s.reducing = false;
  if (!s.shard_wire.empty()) {
    from_wire(options_.precision, s.shard_wire.data(),
              s.grad_slice(static_cast<size_t>(dp_.rank()) * units_[unit].shard),
              units_[unit].shard);
  }
  free_vector(s.grad_wire);
  free_vector(s.shard_wire);
  if (options_.stage > 1) free_vector(s.grad);  // stage 1 keeps it (zeroed after the step)
}

void Zero::mark_ready(size_t param) {
  UnitState& s = unit_of(param, "mark_ready");
  const ZeroUnitLayout& u = units_[params_[param].unit];
  const size_t k = param - u.first_param;
  if (s.marked[k]) {
    throw std::logic_error("ccl::training::Zero::mark_ready: parameter " + std::to_string(param) +
                           " was already marked ready this iteration");
  }
  s.marked[k] = true;
  --s.pending;
  if (options_.stage == 1) return;  // stage 1 reduces in step()
  // Units reduce in decreasing order (the backward pass's), so every rank queues them alike; a
  // finished unit gives its whole gradient back at once.
  while (next_reduce_ < units_.size()) {
    const size_t next = units_.size() - 1 - next_reduce_;
    if (state_[next]->pending != 0) break;
    // Room for it first: the oldest reductions give their whole gradients back.
    while (reducing_.size() >= static_cast<size_t>(options_.reductions_in_flight)) {
      finish_oldest_reduce();
    }
    launch_reduce(next);
    ++next_reduce_;
  }
  while (!reducing_.empty() && state_[reducing_.front()]->reduced.query()) finish_oldest_reduce();
}

void Zero::gather_working_copies() {
  for (size_t v = 0; v < units_.size(); ++v) launch_gather(v);
  for (size_t v = 0; v < units_.size(); ++v) wait_gather(v);
}

void Zero::step() {
  if (options_.stage == 1) {
    for (size_t v = units_.size(); v-- > 0;) launch_reduce(v);
  } else if (next_reduce_ < units_.size()) {
    std::vector<size_t> missing;
    for (size_t v = 0; v < units_.size(); ++v) {
      for (size_t k = 0; k < units_[v].params; ++k) {
        if (!state_[v]->marked[k]) missing.push_back(units_[v].first_param + k);
      }
    }
    throw std::logic_error("ccl::training::Zero::step: parameters not marked ready: " +
                           index_list(missing));
  }
  while (!reducing_.empty()) finish_oldest_reduce();
  optimizer_->step_sharded(pieces_, params_.size(), dp_);
  if (options_.stage < 3) {
    gather_working_copies();
  } else {
    // Units still gathered hold the old values: give them back, the next gather brings new ones.
    for (size_t v = 0; v < units_.size(); ++v) release(v);
  }
  for (size_t v = 0; v < units_.size(); ++v) {
    if (options_.stage == 1) std::fill(state_[v]->grad.begin(), state_[v]->grad.end(), 0.0f);
    std::fill(state_[v]->marked.begin(), state_[v]->marked.end(), false);
    state_[v]->pending = units_[v].params;
  }
  next_reduce_ = 0;
  if (!gather_order_.empty()) last_order_.swap(gather_order_);
  gather_order_.clear();
  track_memory();
}

std::vector<float> Zero::gather_full(size_t param) {
  UnitState& s = unit_of(param, "gather_full");
  const ZeroParam& p = params_[param];
  const ZeroUnitLayout& u = units_[p.unit];
  stream_.synchronize();  // the collective below must follow what is queued, on every rank
  const size_t rank = static_cast<size_t>(dp_.rank());
  std::vector<float> whole(u.shard * static_cast<size_t>(dp_.size()));
  const float* master = s.master_slice(rank * u.shard);
  std::copy_n(master, u.shard, whole.begin() + static_cast<std::ptrdiff_t>(rank * u.shard));
  dp_.all_gather(whole);
  const size_t offset = u.offsets[param - u.first_param];
  return {whole.begin() + static_cast<std::ptrdiff_t>(offset),
          whole.begin() + static_cast<std::ptrdiff_t>(offset + p.count)};
}

ZeroMemory Zero::memory() const {
  ZeroMemory m;
  for (const auto& s : state_) {
    m.parameters += s->working.size() * sizeof(float) + s->wire.size() * sizeof(uint16_t);
    m.master += s->master.size() * sizeof(float);
    m.gradients += (s->grad.size() + s->grad_shard.size()) * sizeof(float) +
                   (s->grad_wire.size() + s->shard_wire.size()) * sizeof(uint16_t);
  }
  m.optimizer = optimizer_->state_bytes();
  return m;
}

void Zero::track_memory() {
  const ZeroMemory m = memory();
  if (m.total() > peak_.total()) peak_ = m;
}

ZeroMemory Zero::peak_memory() const { return peak_; }

void Zero::reset_peak_memory() { peak_ = memory(); }

}  // namespace ccl::training
