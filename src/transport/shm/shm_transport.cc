#include "transport/shm/shm_transport.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap/store.h"
#include "transport/registered_region.h"
#include "transport/shm/doorbell.h"
#include "transport/shm/peer_failures.h"
#include "transport/shm/peer_liveness.h"
#include "transport/shm/registered_memory.h"
#include "transport/shm/shm_connection.h"
#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_window.h"

namespace ccl::transport {

namespace {

using shm::ChannelView;
using shm::Doorbell;
using shm::SegmentGeometry;
using shm::SegmentHeader;
using shm::ShmConnection;
using shm::ShmSegment;

// Far more than any sensible setting; bounds what a peer's description can make us map.
constexpr size_t kMaxWindowBytes = size_t{1} << 30;

// What a rank publishes about its segment under "<tag>/shm/ready/<rank>" (text, for debugging).
struct SegmentInfo {
  int pid = 0;
  std::string name;
  size_t slots = 0;
  size_t slot_bytes = 0;
  size_t window_bytes = 0;
  std::vector<int> channel_ranks;  // the sender of each inbound channel, in channel order

  SegmentGeometry geometry() const {
    return {slots, slot_bytes, channel_ranks.size(), window_bytes};
  }

  std::string encode() const {
    std::ostringstream out;
    out << "v" << shm::kLayoutVersion << " " << pid << " " << name << " " << slots << " "
        << slot_bytes << " " << window_bytes << " " << channel_ranks.size();
    for (int r : channel_ranks) out << " " << r;
    return out.str();
  }

  static SegmentInfo decode(const std::string& text, int from_rank) {
    std::istringstream in(text);
    SegmentInfo info;
    std::string version;
    size_t count = 0;
    in >> version >> info.pid >> info.name >> info.slots >> info.slot_bytes >> info.window_bytes >>
        count;
    bool ok = !in.fail() && version == "v" + std::to_string(shm::kLayoutVersion) &&
              info.slots >= 1 && info.slot_bytes >= kPieceAlign &&
              info.window_bytes <= kMaxWindowBytes && info.slot_bytes % kPieceAlign == 0 &&
              count < (1u << 20);
    for (size_t i = 0; ok && i < count; ++i) {
      int r = -1;
      in >> r;
      ok = !in.fail();
      info.channel_ranks.push_back(r);
    }
    if (!ok) {
      throw_error(cclRemoteError, "shm: malformed segment description from rank %d: '%s'",
                  from_rank, text.c_str());
    }
    return info;
  }
};

ChannelView channel_view(std::byte* base, const SegmentGeometry& geometry, size_t index) {
  std::byte* channel = base + geometry.channels_offset() + index * geometry.channel_stride();
  return ChannelView{reinterpret_cast<shm::ChannelControl*>(channel),
                     channel + sizeof(shm::ChannelControl), geometry.slots, geometry.slot_bytes};
}

void validate(const ShmOptions& options) {
  if (options.slots < 1 || options.slots > 4096) {
    throw_error(cclInvalidUsage, "shm: CCL_SHM_SLOTS must be in [1, 4096], got %zu", options.slots);
  }
  if (options.slot_bytes < kPieceAlign || options.slot_bytes % kPieceAlign != 0) {
    throw_error(cclInvalidUsage,
                "shm: slot size must be a positive multiple of %zu bytes, got %zu (CCL_BUFFSIZE "
                "/ CCL_SHM_SLOTS too small?)",
                kPieceAlign, options.slot_bytes);
  }
  if (options.window_bytes > kMaxWindowBytes) {
    throw_error(cclInvalidUsage, "shm: CCL_SHM_WINDOW must be at most %zu bytes, got %zu",
                kMaxWindowBytes, options.window_bytes);
  }
}

class ShmTransport final : public Transport {
 public:
  ShmTransport(const SetupContext& ctx, const ShmOptions& options)
      : rank_(ctx.rank), tag_(ctx.comm_tag), options_(options) {
    validate(options_);
  }

  ~ShmTransport() override {
    // Peers that outlive us must not take our exit for a failure (check_health).
    if (own_failure_ != nullptr) {
      uint32_t live = shm::FailureLine::kLive;
      if (own_failure_->state.compare_exchange_strong(live, shm::FailureLine::kDeparted)) {
        // A peer asleep waiting for us learns of the goodbye now, not at its next liveness slice.
        for (Doorbell* bell : peer_bells_) shm::doorbell_force(bell);
      }
    }
    // Connections point into the mappings: drop them first (members would do it in reverse
    // declaration order anyway; this keeps the dependency explicit).
    window_.reset();
    connections_.clear();
  }

  const char* name() const override { return "shm"; }

  // cclMemAlloc memory gets the memfd handle of its allocation, for the peers' windows to map.
  void register_memory(RegisteredRegion& region) override {
    RemoteRegion whole;
    if (!shm::registered_find(reinterpret_cast<const void*>(region.base), region.bytes, &whole)) {
      return;
    }
    TransportKey& key = region.add_key(shm::kShmKeyName);
    key.packed_bytes = sizeof(whole);
    std::memcpy(key.packed.data(), &whole, sizeof(whole));
  }

  std::vector<Connection*> connect(const SetupContext& ctx, std::span<const int> peers) override;
  SharedWindow* shared_window() override { return window_.get(); }
  void wait(std::chrono::microseconds timeout) override;
  void interrupt() override {
    interrupt_pending_.store(true, std::memory_order_seq_cst);
    shm::doorbell_force(bell_.load(std::memory_order_acquire));
  }
  void notify_failure(const FailureNotice& notice) override;
  void collect_notices(std::vector<std::pair<int, FailureNotice>>& out) override {
    peer_failures_.collect(out);
  }
  void check_health() override;

 private:
  std::string key(const char* what, int rank) const {
    return tag_ + "/shm/" + what + "/" + std::to_string(rank);
  }
  void check_peers(const SetupContext& ctx, std::span<const int> peers) const;
  void setup(const SetupContext& ctx, std::span<const int> peers,
             std::vector<SegmentInfo>& peer_info);
  void make_window(const SegmentGeometry& own_geometry, std::span<const int> peers,
                   const std::vector<SegmentInfo>& peer_info);
  void cleanup_failed_setup(const SetupContext& ctx, std::span<const int> peers,
                            const std::vector<SegmentInfo>& peer_info);
  bool any_ready() const;
  void check_liveness();

  int rank_;
  std::string tag_;
  ShmOptions options_;
  size_t slot_bytes_ = 0;  // of our inbound rings: options_.slot_bytes, or less to fit the pool
  bool connected_ = false;

  ShmSegment own_;
  std::vector<ShmSegment> peer_segments_;
  std::vector<std::unique_ptr<ShmConnection>> connections_;
  std::unique_ptr<shm::ShmWindow> window_;
  shm::FailureLine* own_failure_ = nullptr;  // in own_
  shm::PeerFailures peer_failures_;
  std::vector<Doorbell*> peer_bells_;

  // Before connect(), wait() and interrupt() use a private doorbell; afterwards the segment's.
  Doorbell private_bell_{};
  std::atomic<Doorbell*> bell_{&private_bell_};
  std::atomic<bool> interrupt_pending_{false};
};

void ShmTransport::check_peers(const SetupContext& ctx, std::span<const int> peers) const {
  if (ctx.store == nullptr) throw_error(cclInternalError, "shm: connect without a store");
  if (ctx.rank != rank_) {
    throw_error(cclInternalError, "shm: connect as rank %d on the transport of rank %d", ctx.rank,
                rank_);
  }
  std::set<int> seen;
  for (int p : peers) {
    if (p < 0 || p >= ctx.nranks || p == rank_ || !seen.insert(p).second) {
      throw_error(cclInternalError, "shm: rank %d cannot connect to rank %d (of %d)", rank_, p,
                  ctx.nranks);
    }
  }
  if (connected_ && !peers.empty()) {
    throw_error(cclInvalidUsage, "shm: connect() may add peers only once per transport");
  }
}

std::vector<Connection*> ShmTransport::connect(const SetupContext& ctx,
                                               std::span<const int> peers) {
  check_peers(ctx, peers);
  if (peers.empty()) return {};
  std::vector<SegmentInfo> peer_info(peers.size());
  try {
    setup(ctx, peers, peer_info);
  } catch (const Error& e) {
    cleanup_failed_setup(ctx, peers, peer_info);
    throw Error(e.code(), "shm connect (rank " + std::to_string(rank_) + "): " + e.what());
  } catch (...) {
    cleanup_failed_setup(ctx, peers, peer_info);
    throw;
  }
  connected_ = true;
  std::vector<Connection*> result;
  for (auto& c : connections_) result.push_back(c.get());
  CCL_INFO(kShm, "shm: rank %d connected to %zu peers, rings of %zu x %zu bytes", rank_,
           peers.size(), options_.slots, slot_bytes_);
  return result;
}

void ShmTransport::setup(const SetupContext& ctx, std::span<const int> peers,
                         std::vector<SegmentInfo>& peer_info) {
  // 1. Create and initialize our segment: one inbound channel per peer, in the order of peers.
  SegmentInfo mine;
  mine.pid = static_cast<int>(getpid());
  mine.name = shm::segment_name(tag_, rank_);
  mine.slots = options_.slots;
  mine.channel_ranks.assign(peers.begin(), peers.end());
  // Only a transport that joins every rank can offer the window.
  bool all_ranks = static_cast<int>(peers.size()) == ctx.nranks - 1;
  mine.window_bytes = all_ranks ? options_.window_bytes : 0;
  // Each segment has its own slot size (its header and SegmentInfo carry it to the producers).
  mine.slot_bytes = slot_bytes_ = pooled_slot_bytes(options_, peers.size(), mine.window_bytes);
  SegmentGeometry geometry = mine.geometry();
  own_ = ShmSegment::create(mine.name, geometry.total_bytes());
  std::byte* base = own_.base();
  auto* header = new (base) SegmentHeader{};
  header->magic = shm::kSegmentMagic;
  header->version = shm::kLayoutVersion;
  header->channels = static_cast<uint32_t>(peers.size());
  header->slots = geometry.slots;
  header->slot_bytes = geometry.slot_bytes;
  header->channel_stride = geometry.channel_stride();
  header->channels_offset = geometry.channels_offset();
  header->owner_rank = rank_;
  header->owner_pid = mine.pid;
  header->window_bytes = geometry.window_bytes;
  if (geometry.window_bytes > 0) {
    auto* lines = reinterpret_cast<shm::MailboxLine*>(base + geometry.window_offset());
    new (&lines[0]) shm::MailboxLine{};
    new (&lines[1]) shm::MailboxLine{};
  }
  auto* bell = new (base + shm::kDoorbellOffset) Doorbell{};
  own_failure_ = new (base + shm::kFailureLineOffset) shm::FailureLine{};
  auto* table = reinterpret_cast<int32_t*>(base + shm::kChannelTableOffset);
  for (size_t i = 0; i < peers.size(); ++i) {
    table[i] = peers[i];
    new (channel_view(base, geometry, i).control) shm::ChannelControl{};
  }
  ctx.store->set(key("ready", rank_), to_bytes(mine.encode()));

  // 2. Map the part of each peer's segment we use: its header and doorbell, and the channel it
  //    keeps for us.
  struct PeerMapping {
    ShmSegment header;
    ShmSegment channel;
  };
  std::vector<PeerMapping> mapped;
  for (size_t i = 0; i < peers.size(); ++i) {
    int p = peers[i];
    peer_info[i] = SegmentInfo::decode(to_string(ctx.store->get(key("ready", p), ctx.deadline)), p);
    const SegmentInfo& info = peer_info[i];
    auto it = std::find(info.channel_ranks.begin(), info.channel_ranks.end(), rank_);
    if (it == info.channel_ranks.end()) {
      throw_error(cclInternalError, "shm: rank %d connects to rank %d, which did not list it",
                  rank_, p);
    }
    size_t index = static_cast<size_t>(it - info.channel_ranks.begin());
    SegmentGeometry g = info.geometry();
    std::vector<ShmSegment> windows =
        ShmSegment::open(info.name, g.total_bytes(),
                         {{0, g.channels_offset()},
                          {g.channels_offset() + index * g.channel_stride(), g.channel_stride()}});
    const auto* h = reinterpret_cast<const SegmentHeader*>(windows[0].base());
    if (h->magic != shm::kSegmentMagic || h->version != shm::kLayoutVersion || h->owner_rank != p ||
        h->slots != g.slots || h->slot_bytes != g.slot_bytes || h->channels != g.channels ||
        h->channel_stride != g.channel_stride() || h->window_bytes != g.window_bytes) {
      throw_error(cclRemoteError, "shm: segment %s of rank %d does not match its description",
                  info.name.c_str(), p);
    }
    mapped.push_back({std::move(windows[0]), std::move(windows[1])});
  }

  // 3. Once every peer has mapped ours, its name can go: nothing is left in /dev/shm even if
  //    a process is killed later. (A neighbourhood barrier: peers need not be all ranks.)
  ctx.store->set(key("mapped", rank_), Bytes{1});
  std::vector<std::string> keys;
  for (int p : peers) keys.push_back(key("mapped", p));
  ctx.store->wait(keys, ctx.deadline);
  own_.unlink();

  // 4. The connections.
  for (size_t i = 0; i < peers.size(); ++i) {
    PeerMapping& m = mapped[i];
    SegmentGeometry g = peer_info[i].geometry();
    ChannelView outbound{reinterpret_cast<shm::ChannelControl*>(m.channel.base()),
                         m.channel.base() + sizeof(shm::ChannelControl), g.slots, g.slot_bytes};
    auto* peer_bell = reinterpret_cast<Doorbell*>(m.header.base() + shm::kDoorbellOffset);
    peer_bells_.push_back(peer_bell);
    peer_failures_.add(peers[i], reinterpret_cast<const shm::FailureLine*>(
                                     m.header.base() + shm::kFailureLineOffset));
    connections_.push_back(std::make_unique<ShmConnection>(
        peers[i], peer_info[i].pid, outbound, channel_view(base, geometry, i), peer_bell));
    peer_segments_.push_back(std::move(m.header));
    peer_segments_.push_back(std::move(m.channel));
  }
  make_window(geometry, peers, peer_info);
  bell_.store(bell, std::memory_order_release);
  // An interrupt() that rang the private doorbell meanwhile stays pending in the flag.
}

void ShmTransport::make_window(const SegmentGeometry& own_geometry, std::span<const int> peers,
                               const std::vector<SegmentInfo>& peer_info) {
  size_t capacity = own_geometry.window_bytes;
  for (const SegmentInfo& info : peer_info) capacity = std::min(capacity, info.window_bytes);
  // Every rank sees the same descriptions, so every rank decides the same way.
  if (capacity == 0) return;
  std::vector<shm::WindowView> views(peers.size() + 1);
  views[rank_] = {own_.base() + own_geometry.window_offset(), own_geometry.window_bulk_stride(),
                  reinterpret_cast<Doorbell*>(own_.base() + shm::kDoorbellOffset), nullptr,
                  static_cast<int>(getpid())};
  for (size_t i = 0; i < peers.size(); ++i) {
    SegmentGeometry g = peer_info[i].geometry();
    std::byte* header = peer_segments_[2 * i].base();  // the peer's [0, channels_offset) window
    views[peers[i]] = {header + g.window_offset(), g.window_bulk_stride(),
                       reinterpret_cast<Doorbell*>(header + shm::kDoorbellOffset),
                       &connections_[i]->liveness(), peer_info[i].pid};
  }
  window_ =
      std::make_unique<shm::ShmWindow>(rank_, std::move(views), capacity, &interrupt_pending_,
                                       options_.liveness_interval, &peer_failures_, options_.cma);
}

void ShmTransport::cleanup_failed_setup(const SetupContext& ctx, std::span<const int> peers,
                                        const std::vector<SegmentInfo>& peer_info) {
  connections_.clear();
  own_failure_ = nullptr;  // they point into the mappings that go now
  peer_bells_.clear();
  peer_failures_ = shm::PeerFailures();
  peer_segments_.clear();
  own_ = ShmSegment();  // unmaps and removes our name
  std::vector<int> pids(peers.size(), 0);
  for (size_t i = 0; i < peers.size(); ++i) {
    pids[i] = peer_info[i].pid;
    if (pids[i] <= 0 && static_cast<size_t>(peers[i]) < ctx.peers.size()) {
      pids[i] = ctx.peers[peers[i]].pid;
    }
  }
  remove_segments_of_exited(tag_, peers, pids);
}

bool ShmTransport::any_ready() const {
  for (const auto& c : connections_) {
    if (c->ready()) return true;
  }
  return false;
}

void ShmTransport::wait(std::chrono::microseconds timeout) {
  Doorbell* bell = bell_.load(std::memory_order_acquire);
  auto slice = std::chrono::duration_cast<std::chrono::microseconds>(options_.liveness_interval);
  // The peers this wait needs: those with a message pending on their connection.
  const auto awaited = [&](int rank) {
    return std::any_of(connections_.begin(), connections_.end(),
                       [&](const auto& c) { return c->peer() == rank && c->busy(); });
  };
  const bool slept = shm::doorbell_sleep(
      bell, interrupt_pending_, [&] { return any_ready() || peer_failures_.any(awaited); },
      std::min(timeout, slice));
  // What a failed peer sent before its notice is still good: only a wait with nothing to take
  // fails (the executor comes back here once it has taken what is there).
  if (!any_ready()) peer_failures_.throw_if_any(awaited);
  if (slept) check_liveness();
}

void ShmTransport::notify_failure(const FailureNotice& notice) {
  if (own_failure_ == nullptr || own_failure_->state.load() != shm::FailureLine::kLive) return;
  own_failure_->notice = notice;
  own_failure_->state.store(shm::FailureLine::kFailed, std::memory_order_seq_cst);  // W1
  // Unconditionally: a peer between its ready() check and its futex wait is covered by the
  // sequence change, one that sleeps by the wake.
  for (Doorbell* bell : peer_bells_) shm::doorbell_force(bell);
}

void ShmTransport::check_health() {
  peer_failures_.throw_if_any();
  for (auto& c : connections_) {
    if (c->liveness().exited() && !peer_failures_.departed(c->peer())) {
      c->liveness().throw_exited(c->peer());
    }
  }
}

void ShmTransport::check_liveness() {
  for (auto& c : connections_) {
    if (!c->busy()) continue;
    const bool departed = peer_failures_.departed(c->peer());
    if (!departed && !c->liveness().exited()) continue;
    // Drain first: what the peer wrote before it died or left is still good.
    while (c->progress()) {
    }
    if (!c->busy()) continue;
    if (c->liveness().exited()) c->liveness().throw_exited(c->peer());
    shm::PeerFailures::throw_departed(c->peer());
  }
}

}  // namespace

ShmOptions shm_options_from_config() {
  int64_t slots = config_int("CCL_SHM_SLOTS");
  int64_t buffer = config_int("CCL_BUFFSIZE");
  if (slots < 1 || slots > 4096) {
    throw_error(cclInvalidUsage, "CCL_SHM_SLOTS must be in [1, 4096], got %lld",
                static_cast<long long>(slots));
  }
  if (buffer < 0) {
    throw_error(cclInvalidUsage, "CCL_BUFFSIZE must be positive, got %lld",
                static_cast<long long>(buffer));
  }
  ShmOptions options;
  options.slots = static_cast<size_t>(slots);
  options.slot_bytes = static_cast<size_t>(buffer) / options.slots / kPieceAlign * kPieceAlign;
  int64_t window = config_int("CCL_SHM_WINDOW");
  if (window < 0) {
    throw_error(cclInvalidUsage, "CCL_SHM_WINDOW must not be negative, got %lld",
                static_cast<long long>(window));
  }
  options.window_bytes = static_cast<size_t>(window);
  const int64_t pool = config_int("CCL_SHM_POOL");
  if (pool < 0) {
    throw_error(cclInvalidUsage, "CCL_SHM_POOL must not be negative, got %lld",
                static_cast<long long>(pool));
  }
  options.pool_bytes = static_cast<size_t>(pool);
  options.cma = config_bool("CCL_SHM_CMA");
  validate(options);
  return options;
}

size_t pooled_slot_bytes(const ShmOptions& options, size_t channels, size_t window_bytes) {
  SegmentGeometry geometry{options.slots, options.slot_bytes, channels, window_bytes};
  if (options.pool_bytes == 0 || channels == 0 || geometry.total_bytes() <= options.pool_bytes) {
    return options.slot_bytes;
  }
  // Each channel's share of what the pool leaves after the header and the window, less a page
  // for the rounding of each channel to kPage.
  const size_t fixed = geometry.channels_offset();
  const size_t share = options.pool_bytes > fixed ? (options.pool_bytes - fixed) / channels : 0;
  const size_t ring = share > shm::kPage + sizeof(shm::ChannelControl)
                          ? share - shm::kPage - sizeof(shm::ChannelControl)
                          : 0;
  const size_t per_slot = ring / options.slots;
  const size_t slot = per_slot > sizeof(shm::SlotHeader) ? per_slot - sizeof(shm::SlotHeader) : 0;
  return std::clamp(slot / kPieceAlign * kPieceAlign, kPieceAlign, options.slot_bytes);
}

void remove_segments_of_exited(const std::string& comm_tag, std::span<const int> ranks,
                               std::span<const int> pids) {
  // A rank that died before it could remove its own name would leave it behind: remove it for
  // it. Its name is known even if it died before publishing it, and only its process creates
  // that name, so removing it once the process is gone is safe. Live ranks remove their own.
  for (size_t i = 0; i < ranks.size() && i < pids.size(); ++i) {
    if (pids[i] <= 0) continue;
    shm::PeerLiveness liveness(pids[i]);
    if (liveness.exited()) {
      const std::string name = shm::segment_name(comm_tag, ranks[i]);
      CCL_INFO(kShm, "shm: removing %s of rank %d (pid %d, exited)", name.c_str(), ranks[i],
               pids[i]);
      shm::unlink_name(name);
    }
  }
}

std::unique_ptr<Transport> make_shm_transport(const SetupContext& ctx) {
  return make_shm_transport(ctx, shm_options_from_config());
}

std::unique_ptr<Transport> make_shm_transport(const SetupContext& ctx, const ShmOptions& options) {
  return std::make_unique<ShmTransport>(ctx, options);
}

}  // namespace ccl::transport
