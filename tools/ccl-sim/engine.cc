// The event loop: a heap of timed events (a rank starts, a message's latency ends, a flow ends),
// channels per ordered pair, and flows over shared resources whose rates are recomputed for the
// flows that share a resource with one that starts or ends.
#include "engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>

#include "base/error.h"

namespace ccl::sim {

namespace {

constexpr double kBytesPerUsPerGbps = 1e3;  // 1 GB/s = 10^9 B/s = 10^3 B/us

struct OpRef {
  int rank = -1;
  uint32_t op = 0;
};

struct Flow {
  double initial = 0;    // bytes it carries (a message's size)
  double remaining = 0;  // bytes (local jobs: bytes at the core's rate)
  double rate = 0;       // bytes per us
  double last = 0;       // when `remaining` was last brought up to date
  uint32_t version = 0;  // bumped when its end event is rescheduled
  std::array<uint32_t, Route::kMaxResources + 1> res{};
  int nres = 0;
  bool live = false;
  bool scheduled = false;  // its end event is in the heap, at its current rate
  uint64_t mark = 0;       // the last flush() that updated it
  // What its end completes: a message of a channel, or a local job for an op.
  int channel = -1;
  uint64_t message = 0;
  bool with_core = false;  // a message whose receiver reduces it as it flows
  double backlog = 0;      // bytes of it that flowed before its receive was posted
  OpRef op;
  // Which resource held it back (--explain): the one binding it now and the bytes moved since,
  // and the one that bound the most bytes so far.
  int64_t bound = -1;
  double bound_bytes = 0;
  int64_t most_bound = -1;
  double most_bytes = 0;
  void note_moved(double bytes) {
    bound_bytes += bytes;
    if (bound_bytes > most_bytes) {
      most_bytes = bound_bytes;
      most_bound = bound;
    }
  }
};

// What an op waited for, for the critical path (only when explaining).
struct OpTrace {
  double begin = 0;  // its message started to flow / its local work started
  double done = 0;
  double arrival = 0;  // a send: when its message reached the receiver (done + latency)
  OpRef gate;          // a receive: the send whose arrival completed it; a send: the message ahead
                       // of it on its connection; none (rank -1): it waited only for its round
  int channel = -1;    // a send's connection
  int64_t bottleneck = -1;
  bool pass_after_arrival = false;  // a receive reduced after its bytes had arrived
};

constexpr uint32_t kNoOp = UINT32_MAX;
// A bound on the ops traced for --explain (40 B each): beyond it the path is not recorded.
constexpr size_t kMaxTracedOps = size_t{16} << 20;
constexpr size_t kMaxPathSteps = size_t{1} << 20;

struct Message {
  OpRef send;
  uint64_t bytes = 0;
};

struct Channel {
  int to = 0;  // the receiving representative
  Route route;
  std::deque<Message> queued;  // posted, not started
  bool busy = false;           // a message's bytes flowing
  uint32_t flowing = 0;        // that message's flow
  uint64_t started = 0;        // messages that began to flow (their index is the match)
  std::deque<OpRef> recvs;     // posted receives not yet matched
  struct Arrived {
    uint64_t bytes = 0;
    double at = 0;
  };
  std::deque<Arrived> arrived;  // messages that arrived before their receive
  uint64_t recv_posted = 0;
  uint64_t matched = 0;
};

struct RankState {
  uint32_t round = 0;
  uint32_t pending = 0;
  bool done = false;
  double finish = 0;
};

enum class EventKind : uint8_t { RankStart, FlowStart, Arrival, FlowEnd, DelayEnd };

// A message whose bytes left and are on the wire for its route's latency.
struct InFlight {
  int channel = -1;
  uint64_t message = 0;
  uint64_t bytes = 0;
  bool with_core = false;
  double backlog = 0;
  OpRef send;
};

struct Event {
  double t;
  uint64_t seq;
  EventKind kind;
  uint32_t id;
  uint32_t version;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

class Sim {
 public:
  Sim(const Network& net, std::span<const Program> programs, const SimOptions& options)
      : net_(net),
        programs_(programs),
        res_(net.resources()),
        full_(net.nranks()),
        period_(options.period == 0 ? net.nranks() : options.period),
        xor_(options.xor_symmetry) {
    if (period_ < 1 || full_ % period_ != 0 || static_cast<int>(programs.size()) != period_) {
      throw Error(cclInternalError, "ccl-sim: " + std::to_string(programs.size()) +
                                        " programs for " + std::to_string(full_) +
                                        " ranks with period " + std::to_string(period_));
    }
    ranks_.resize(static_cast<size_t>(period_));
    on_resource_.resize(res_.size());
    resource_mark_.assign(res_.size(), 0);
    copy_scale_ = net.reduce_gbps() / net.copy_gbps();
    size_t ops = 0;
    for (const Program& p : programs) ops += p.ops.size();
    explain_ = options.explain && ops <= kMaxTracedOps;
    capacity_.reserve(res_.size());
    for (const Resource& r : res_) {
      capacity_.push_back(r.gbps * kBytesPerUsPerGbps * (r.memory ? options.memory_scale : 1.0));
    }
    if (explain_) {
      trace_.resize(programs.size());
      last_of_round_.resize(programs.size());
      for (size_t r = 0; r < programs.size(); ++r) {
        trace_[r].resize(programs[r].ops.size());
        last_of_round_[r].assign(programs[r].rounds(), kNoOp);
      }
    }
  }

  SimResult run() {
    const int n = period_;
    for (int r = 0; r < n; ++r) push(net_.call_overhead_us(), EventKind::RankStart, r, 0);
    for (;;) {
      // Rates are settled before time moves on (flush may add events at this instant).
      if (!dirty_.empty() && (events_.empty() || events_.top().t > now_)) {
        flush();
        continue;
      }
      if (events_.empty()) break;
      const Event e = events_.top();
      events_.pop();
      now_ = e.t;
      ++result_.events;
      switch (e.kind) {
        case EventKind::RankStart:
          start_round(static_cast<int>(e.id));
          break;
        case EventKind::FlowStart:
          begin_flow_of(static_cast<int>(e.id));
          break;
        case EventKind::Arrival:
          arrive(e.id);
          break;
        case EventKind::FlowEnd:
          if (flows_[e.id].live && flows_[e.id].version == e.version) end_flow(e.id);
          break;
        case EventKind::DelayEnd:
          complete(delays_[e.id]);
          break;
      }
    }
    result_.finish_us.resize(static_cast<size_t>(n));
    std::string stuck;
    for (int r = 0; r < n; ++r) {
      const RankState& s = ranks_[static_cast<size_t>(r)];
      if (!s.done) {
        if (stuck.size() < 400) {
          stuck += " rank " + std::to_string(r) + " in round " + std::to_string(s.round) + ";";
        }
        continue;
      }
      result_.finish_us[static_cast<size_t>(r)] = s.finish;
      if (s.finish > result_.time_us) {
        result_.time_us = s.finish;
        result_.last_rank = r;
      }
    }
    if (!stuck.empty()) {
      throw Error(cclInternalError,
                  "ccl-sim: the schedules deadlock: nothing is left to "
                  "happen and" +
                      stuck + " still wait");
    }
    if (explain_) result_.critical_path = critical_path();
    return result_;
  }

 private:
  void push(double t, EventKind kind, int id, uint32_t version) {
    events_.push({t, seq_++, kind, static_cast<uint32_t>(id), version});
  }

  const Op& op_at(OpRef ref) const { return programs_[static_cast<size_t>(ref.rank)].ops[ref.op]; }

  // --- rounds ---

  void start_round(int rank) {
    RankState& s = ranks_[static_cast<size_t>(rank)];
    const Program& p = programs_[static_cast<size_t>(rank)];
    while (s.round < p.rounds()) {
      const uint32_t begin = s.round == 0 ? 0 : p.round_end[s.round - 1];
      const uint32_t end = p.round_end[s.round];
      s.pending = end - begin;
      for (uint32_t i = begin; i < end; ++i) post({rank, i});
      if (s.pending > 0) return;  // the last completion starts the next round
      ++s.round;
    }
    s.done = true;
    s.finish = now_;
  }

  void complete(OpRef ref) {
    RankState& s = ranks_[static_cast<size_t>(ref.rank)];
    if (explain_) trace_of(ref).done = now_;
    if (--s.pending == 0) {
      if (explain_) last_of_round_[size_t(ref.rank)][s.round] = ref.op;
      ++s.round;
      start_round(ref.rank);
    }
  }

  void post(OpRef ref) {
    const Op& op = op_at(ref);
    if ((op.kind == OpKind::Send || op.kind == OpKind::Recv || op.kind == OpKind::RecvReduce) &&
        (op.peer < 0 || op.peer >= full_ || op.peer == ref.rank)) {
      throw Error(cclInternalError, "ccl-sim: rank " + std::to_string(ref.rank) +
                                        " has a step with peer " + std::to_string(op.peer));
    }
    switch (op.kind) {
      case OpKind::Send: {
        // Over a quotient the message lands on the receiver's representative j, which sees it
        // come from the sender moved as the receiver was: by the move that takes q to j.
        const int j = op.peer % period_;
        const int from = moved(ref.rank, op.peer, j);
        const int id = channel_id(from, j);
        Channel& c = channels_[size_t(id)];
        c.queued.push_back({ref, op.bytes});
        ++result_.messages;
        if (!c.busy) start_message(id, OpRef{});
        break;
      }
      case OpKind::Recv:
      case OpKind::RecvReduce: {
        Channel& c = channel(op.peer, ref.rank);
        ++c.recv_posted;
        if (!c.arrived.empty()) {  // its bytes came first: a local pass over them now
          const Channel::Arrived m = c.arrived.front();
          c.arrived.pop_front();
          ++c.matched;
          // Posted at the instant they arrived, a plain receive counts as posted first (the
          // order of events at one instant must not matter): they landed in place.
          if (works_as_it_lands(c, ref) || m.at < now_) {
            pass_over(ref, double(m.bytes));
          } else {
            complete(ref);
          }
        } else {
          c.recvs.push_back(ref);
          if (c.busy && c.started == c.recv_posted && works_as_it_lands(c, ref)) join_flow(c);
        }
        break;
      }
      case OpKind::Copy:
        local_job(ref, double(op.bytes) * copy_scale_);
        break;
      case OpKind::Reduce:
        local_job(ref, double(op.bytes));
        break;
      case OpKind::Delay:
        if (explain_) trace_of(ref).begin = now_;
        delays_.push_back(ref);
        push(now_ + double(op.bytes) * 1e-3, EventKind::DelayEnd, int(delays_.size() - 1), 0);
        break;
    }
  }

  // --- channels ---

  static uint64_t key(int from, int to) { return (uint64_t(uint32_t(from)) << 32) | uint32_t(to); }

  int channel_id(int from, int to) {
    const auto [it, fresh] = channel_index_.try_emplace(key(from, to), int(channels_.size()));
    if (fresh) {
      Channel c;
      c.to = to;
      c.route = route_of(from, to);
      channels_.push_back(std::move(c));
    }
    return it->second;
  }
  Channel& channel(int from, int to) { return channels_[size_t(channel_id(from, to))]; }

  // `x` moved by the move of the quotient's group that takes `a` to `b`: x - (a - b) mod n, or
  // with XOR symmetry x ^ (a ^ b) (a ^ b is then a multiple of P, as a - b is).
  int moved(int x, int a, int b) const {
    if (xor_) return x ^ (a ^ b);
    return ((x - (a - b)) % full_ + full_) % full_;
  }

  // The route of the channel into representative `to` from the rank labelled `from`. It stands
  // for the pair (r, q) of the sender's representative r = from mod P and the rank q it sent to
  // (`to` moved as `from` is moved to r): the sender's side is that pair's, the receiver's side
  // (from, to)'s, its image on the representatives. Without a quotient both pairs are (from,
  // to).
  Route route_of(int from, int to) const {
    const int r = from % period_;
    const int q = moved(to, r, from);
    if (r == from) return net_.route(from, to);
    const Route sender = net_.route(r, q);
    const Route receiver = net_.route(from, to);
    Route route;
    route.alpha_us = sender.alpha_us;
    route.send_us = sender.send_us;
    route.link = sender.link;
    route.receiver_copies = sender.receiver_copies;
    for (int i = 0; i < sender.sender; ++i) route.add(sender.resources[size_t(i)]);
    route.sender = route.count;
    for (int i = receiver.sender; i < receiver.count; ++i) route.add(receiver.resources[size_t(i)]);
    return route;
  }

  // The next queued message of channel `id` starts: its bytes flow, then they travel for the
  // route's latency. `behind`: the send whose bytes had to leave first (none when it was idle).
  void start_message(int id, OpRef behind) {
    Channel& c = channels_[size_t(id)];
    c.busy = true;
    if (explain_) {
      OpTrace& t = trace_of(c.queued.front().send);
      t.begin = now_;
      t.gate = behind;
      t.channel = id;
    }
    if (c.route.send_us > 0) {
      push(now_ + c.route.send_us, EventKind::FlowStart, id, 0);
    } else {
      begin_flow_of(id);
    }
  }

  void begin_flow_of(int id) {
    Channel& c = channels_[size_t(id)];
    const Message m = c.queued.front();
    c.queued.pop_front();
    const uint64_t index = c.started++;
    // Its receive is posted when more receives than this message's index were: then a
    // RecvReduce reduces the pieces as they land, on the receiver's core.
    const bool with_core =
        c.recv_posted > index && works_as_it_lands(c, c.recvs[size_t(index - c.matched)]);
    const uint32_t f = new_flow(double(m.bytes));
    c.flowing = f;
    Flow& flow = flows_[f];
    flow.channel = id;
    flow.message = index;
    flow.op = m.send;
    flow.with_core = with_core;
    for (int i = 0; i < c.route.count; ++i)
      flow.res[size_t(flow.nres++)] = c.route.resources[size_t(i)];
    if (with_core) add_receiver_core(flow, c.to);
    start_flow(f);
  }

  // Whether receive `recv` works on its bytes with the receiver's core: a reduction, or a copy
  // out of a shared buffer (Route::receiver_copies). Such a receive posted before its bytes
  // flow occupies the core while they do; otherwise it makes a pass over them afterwards.
  bool works_as_it_lands(const Channel& c, OpRef recv) const {
    return op_at(recv).kind == OpKind::RecvReduce || c.route.receiver_copies;
  }

  // The receive's pass over `bytes` that landed without it: a reduction, or a copy out.
  void pass_over(OpRef recv, double bytes) {
    local_job(recv, op_at(recv).kind == OpKind::RecvReduce ? bytes : bytes * copy_scale_);
  }

  void add_receiver_core(Flow& flow, int to) {
    const uint32_t core = net_.core_of(to);
    if (std::find(flow.res.begin(), flow.res.begin() + flow.nres, core) ==
        flow.res.begin() + flow.nres) {
      flow.res[size_t(flow.nres++)] = core;
    }
  }

  // A receive posted while its message flows: it reduces (or copies out) the rest as it comes;
  // what flowed before is left for a pass after the arrival. Posted at the instant the flow
  // began, that is nothing: the order of events at one instant does not matter.
  void join_flow(Channel& c) {
    Flow& flow = flows_[c.flowing];
    if (flow.with_core) return;
    const double moved = std::min(flow.remaining, flow.rate * (now_ - flow.last));
    flow.backlog = flow.initial - (flow.remaining - moved);
    flow.with_core = true;
    const int before = flow.nres;
    add_receiver_core(flow, c.to);
    if (flow.nres > before) {
      on_resource_[flow.res[size_t(before)]].push_back(c.flowing);
      touch(flow);
    }
  }

  // A message's bytes left: the send is done and the channel takes its next message, while
  // these travel for the route's latency.
  void sent(const Flow& flow) {
    Channel& c = channels_[size_t(flow.channel)];
    c.busy = false;
    uint32_t a;
    if (!free_in_flight_.empty()) {
      a = free_in_flight_.back();
      free_in_flight_.pop_back();
    } else {
      a = uint32_t(in_flight_.size());
      in_flight_.emplace_back();
    }
    in_flight_[a] = {flow.channel,   flow.message, uint64_t(flow.initial),
                     flow.with_core, flow.backlog, flow.op};
    push(now_ + std::max(0.0, c.route.alpha_us - c.route.send_us), EventKind::Arrival, int(a), 0);
    if (!c.queued.empty()) start_message(flow.channel, flow.op);
    complete(flow.op);
  }

  void arrive(uint32_t a) {
    const InFlight m = in_flight_[a];
    free_in_flight_.push_back(a);
    // Everything on the channel first: completing an op may post the next round, whose new
    // channels can move channels_ (the reference would dangle).
    Channel& c = channels_[size_t(m.channel)];
    if (explain_) trace_of(m.send).arrival = now_;
    OpRef recv;
    if (c.recv_posted > m.message) {
      recv = c.recvs.front();
      c.recvs.pop_front();
      ++c.matched;
    } else {
      c.arrived.push_back({m.bytes, now_});
    }
    if (recv.rank < 0) return;
    // Posted while the bytes flowed without the receiver's core: the reduction (or the copy out
    // of a shared buffer) is left to do.
    const double left = m.with_core                  ? m.backlog
                        : works_as_it_lands(c, recv) ? double(m.bytes)
                                                     : 0.0;
    if (explain_) {
      OpTrace& t = trace_of(recv);
      t.gate = m.send;
      t.pass_after_arrival = left > 0;
    }
    if (left > 0) {
      pass_over(recv, left);
    } else {
      complete(recv);
    }
  }

  // --- flows ---

  uint32_t new_flow(double bytes) {
    uint32_t f;
    if (!free_flows_.empty()) {
      f = free_flows_.back();
      free_flows_.pop_back();
      const uint32_t version = flows_[f].version + 1;
      flows_[f] = Flow{};
      flows_[f].version = version;
    } else {
      f = uint32_t(flows_.size());
      flows_.emplace_back();
    }
    flows_[f].remaining = bytes;
    flows_[f].initial = bytes;
    return f;
  }

  void local_job(OpRef op, double core_bytes) {
    if (explain_) trace_of(op).begin = now_;
    const uint32_t f = new_flow(core_bytes);
    Flow& flow = flows_[f];
    flow.op = op;
    flow.res[size_t(flow.nres++)] = net_.core_of(op.rank);
    start_flow(f);
  }

  void start_flow(uint32_t f) {
    Flow& flow = flows_[f];
    flow.live = true;
    flow.last = now_;
    for (int i = 0; i < flow.nres; ++i) on_resource_[flow.res[size_t(i)]].push_back(f);
    touch(flow);
  }

  void end_flow(uint32_t f) {
    Flow& flow = flows_[f];
    flow.live = false;
    for (int i = 0; i < flow.nres; ++i) {
      auto& v = on_resource_[flow.res[size_t(i)]];
      v.erase(std::find(v.begin(), v.end(), f));
    }
    free_flows_.push_back(f);
    touch(flow);
    if (explain_) {
      flow.note_moved(flow.remaining);
      trace_of(flow.op).bottleneck = flow.most_bound;
    }
    const Flow done = flow;  // sent() may make flows, which may move flows_
    if (done.channel >= 0) {
      sent(done);
    } else {
      complete(done.op);
    }
  }

  // A flow started or ended: the flows on its resources need new rates. They get them once per
  // instant (flush), not once per start or end: when a round starts on every rank at once, a
  // leaf's uplink gains hundreds of flows at the same time.
  void touch(const Flow& flow) {
    for (int i = 0; i < flow.nres; ++i) {
      const uint32_t r = flow.res[size_t(i)];
      if (resource_mark_[r] == dirty_epoch_) continue;
      resource_mark_[r] = dirty_epoch_;
      dirty_.push_back(r);
    }
  }

  void flush() {
    ++epoch_;
    for (uint32_t r : dirty_) {
      for (uint32_t g : on_resource_[r]) {
        if (flows_[g].mark == epoch_) continue;
        flows_[g].mark = epoch_;
        update_rate(g);
      }
    }
    dirty_.clear();
    ++dirty_epoch_;
  }

  void update_rate(uint32_t g) {
    Flow& flow = flows_[g];
    const double moved = std::min(flow.remaining, flow.rate * (now_ - flow.last));
    flow.remaining = std::max(0.0, flow.remaining - moved);
    flow.last = now_;
    double rate = std::numeric_limits<double>::infinity();
    int64_t bound = -1;
    for (int i = 0; i < flow.nres; ++i) {
      const uint32_t r = flow.res[size_t(i)];
      const double share = capacity_[r] / double(on_resource_[r].size());
      if (share < rate) {
        rate = share;
        bound = r;
      }
    }
    if (explain_) {
      flow.note_moved(moved);
      if (bound != flow.bound) {
        flow.bound = bound;
        flow.bound_bytes = 0;
      }
    }
    // An unchanged rate keeps its end event: most flows sharing a resource with one that starts
    // or ends are held back elsewhere (their bottleneck did not move).
    if (flow.scheduled && rate == flow.rate) return;
    flow.rate = rate;
    flow.scheduled = true;
    ++flow.version;
    const double left = flow.remaining <= 0 || std::isinf(rate) ? 0.0 : flow.remaining / rate;
    push(now_ + left, EventKind::FlowEnd, int(g), flow.version);
  }

  // --- the critical path ---

  OpTrace& trace_of(OpRef ref) { return trace_[size_t(ref.rank)][ref.op]; }

  uint32_t round_of(OpRef ref) const {
    const auto& ends = programs_[size_t(ref.rank)].round_end;
    return uint32_t(std::upper_bound(ends.begin(), ends.end(), ref.op) - ends.begin());
  }

  // The op whose completion started `rank`'s round `round` (the last to finish in the rounds
  // before it that had ops); none for its first.
  OpRef round_gate(int rank, uint32_t round) const {
    const auto& last = last_of_round_[size_t(rank)];
    while (round-- > 0) {
      if (last[round] != kNoOp) return {rank, last[round]};
    }
    return {};
  }

  std::vector<PathStep> critical_path() {
    std::vector<PathStep> path;
    const int last_rank = result_.last_rank;
    OpRef cur = round_gate(last_rank, uint32_t(programs_[size_t(last_rank)].rounds()));
    // A send reached from the receive its arrival completed ends at that arrival (its latency is
    // on the path); one that ended its own round, or let the next message go, ends when its
    // bytes left.
    bool to_arrival = false;
    while (cur.rank >= 0 && path.size() < kMaxPathSteps) {
      const OpTrace& t = trace_of(cur);
      const Op& op = op_at(cur);
      PathStep step{cur.rank, round_of(cur), op.kind, op.peer, op.bytes, t.begin, t.done};
      step.bottleneck = t.bottleneck;
      if ((op.kind == OpKind::Recv || op.kind == OpKind::RecvReduce) && t.gate.rank >= 0) {
        // Completed by its message: the path goes on through the send, after the reduction
        // that followed the arrival if there was one.
        if (t.pass_after_arrival) {
          step.begin_us = trace_of(t.gate).arrival;
          path.push_back(step);
        }
        cur = t.gate;
        to_arrival = true;
        continue;
      }
      if (op.kind == OpKind::Send) {
        const Route& route = channels_[size_t(t.channel)].route;
        step.link = route.link;
        step.latency_us = route.send_us;
        if (to_arrival) {
          step.latency_us = route.alpha_us;
          step.end_us = t.arrival;
        }
      }
      to_arrival = false;
      path.push_back(step);
      cur = op.kind == OpKind::Send && t.gate.rank >= 0 ? t.gate : round_gate(cur.rank, step.round);
    }
    std::reverse(path.begin(), path.end());
    return path;
  }

  const Network& net_;
  std::span<const Program> programs_;
  const std::vector<Resource>& res_;
  std::vector<double> capacity_;  // bytes per us, by resource (memory_scale applied)
  int full_;                      // ranks of the network
  int period_;                    // ranks simulated: all, or the representatives of a quotient
  bool xor_;                      // the quotient's moves are XORs, not additions
  std::vector<RankState> ranks_;
  std::vector<Channel> channels_;
  std::unordered_map<uint64_t, int> channel_index_;
  std::vector<Flow> flows_;
  std::vector<OpRef> delays_;        // by DelayEnd event id
  std::vector<InFlight> in_flight_;  // by Arrival event id
  std::vector<uint32_t> free_in_flight_;
  std::vector<uint32_t> free_flows_;
  std::vector<std::vector<uint32_t>> on_resource_;
  uint64_t epoch_ = 0;
  std::vector<uint32_t> dirty_;          // resources whose flows need new rates
  std::vector<uint64_t> resource_mark_;  // == dirty_epoch_: already in dirty_
  uint64_t dirty_epoch_ = 1;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  double now_ = 0;
  double copy_scale_ = 1;
  SimResult result_;
  bool explain_ = false;
  std::vector<std::vector<OpTrace>> trace_;           // [rank][op], when explaining
  std::vector<std::vector<uint32_t>> last_of_round_;  // [rank][round]: the op that ended it
};

}  // namespace

SimResult simulate(const Network& network, std::span<const Program> programs,
                   const SimOptions& options) {
  return Sim(network, programs, options).run();
}

}  // namespace ccl::sim
