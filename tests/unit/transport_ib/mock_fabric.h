// The state behind MockVerbs (mock_verbs.h): the objects the fake provider hands out and the
// fabric they form. Internal to the mock's two source files.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mock_verbs.h"

namespace ccl::transport::ib::mock {

struct MDevice {
  ibv_device device{};  // first: the pointer handed out is the MDevice's
  MockDevice config;
};

struct MContext {
  ibv_context context{};
  MDevice* device = nullptr;
  int process = 0;
  bool dead = false;
};

struct MPd {
  ibv_pd pd{};
  MContext* owner = nullptr;
};

struct MMr {
  ibv_mr mr{};
  MPd* pd = nullptr;
  int access = 0;
};

struct MCq;
struct MChannel {
  ibv_comp_channel channel{};
  std::deque<MCq*> events;
};

struct MCompletion {
  ibv_wc wc{};
  int64_t sq_index = -1;  // a send completion retires the send queue up to this WR
};

struct MCq {
  ibv_cq cq{};
  MChannel* channel = nullptr;
  size_t capacity = 0;
  std::deque<MCompletion> entries;
  bool armed = false;
  bool overflowed = false;
  unsigned unacked_events = 0;
};

struct MSendWr {
  ibv_send_wr wr{};
  std::vector<ibv_sge> sges;
  int64_t sq_index = 0;
};

struct MQp {
  ibv_qp qp{};
  MContext* owner = nullptr;
  MPd* pd = nullptr;
  MCq* send_cq = nullptr;
  MCq* recv_cq = nullptr;
  ibv_qp_cap cap{};
  bool sig_all = false;
  bool dead = false;
  ibv_qp_state state = IBV_QPS_RESET;
  int port = 0;
  int access = 0;
  ibv_ah_attr ah{};
  ibv_mtu path_mtu = IBV_MTU_256;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;  // next PSN expected from the peer
  uint32_t sq_psn = 0;  // next PSN sent
  uint8_t rnr_retry = 0;
  std::deque<uint64_t> recvs;   // posted receive wr_ids
  std::deque<MSendWr> stalled;  // RNR: waiting for the target to post a receive
  int64_t sq_posted = 0;
  int64_t sq_retired = 0;
};

struct Fabric {
  mutable std::mutex mutex;
  VerbsApi api{};
  std::vector<std::unique_ptr<MDevice>> devices;
  std::map<ibv_context*, std::unique_ptr<MContext>> contexts;
  std::map<ibv_pd*, std::unique_ptr<MPd>> pds;
  std::map<ibv_mr*, std::unique_ptr<MMr>> mrs;
  std::map<ibv_comp_channel*, std::unique_ptr<MChannel>> channels;
  std::map<ibv_cq*, std::unique_ptr<MCq>> cqs;
  std::map<uint32_t, std::unique_ptr<MQp>> qps;  // by qp_num
  uint32_t next_qpn = 0x100;
  uint32_t next_key = 0x1000;
  MockStats stats;

  MMr* mr_by_lkey(uint32_t lkey);
  MMr* mr_by_rkey(uint32_t rkey);
  const MockPort* port_of(const MQp& qp) const;
  // Completions, with the channel event of an armed CQ.
  void complete(MCq* cq, const ibv_wc& wc, int64_t sq_index = -1);
  // ERR: what is posted is flushed (a dead QP flushes nothing: nobody listens).
  void to_error(MQp* qp);
  void fail_send(MQp* qp, const MSendWr& wr, ibv_wc_status status);
  // Executes `wr` of `qp`; false if it stalls (RNR) and must wait for a receive.
  bool execute(MQp* qp, const MSendWr& wr);
  // Runs the stalled writes of QPs targeting `target` (after it posted a receive or died).
  void retry_stalled(uint32_t target);
};

Fabric& fabric();              // the installed one; valid while a MockVerbs lives
void fill_api(VerbsApi* api);  // the table of mock functions (mock_verbs_api.cc)

}  // namespace ccl::transport::ib::mock
