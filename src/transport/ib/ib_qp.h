// An RC queue pair and the path from RESET to RTS, the states a connected QP goes through:
//   RESET -> INIT  (port, pkey index 0, remote write allowed)
//   INIT  -> RTR   (the peer's QP number and first PSN, its LID or GID, the path MTU)
//   RTR   -> RTS   (our first PSN, CCL_IB_TIMEOUT, CCL_IB_RETRY_CNT, RNR retry 7 = forever)
// Each step passes exactly the attributes the verbs spec requires of it (a provider refuses a
// transition with a missing or extra attribute).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "transport/ib/ib_devices.h"
#include "transport/ib/verbs_api.h"

namespace ccl::transport::ib {

struct RemoteQp {
  bool ethernet = false;
  uint16_t lid = 0;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;  // the peer port's active MTU
  uint32_t qpn = 0;
  uint32_t psn = 0;  // the first PSN it sends
};

struct QpTimeouts {
  int timeout = 20;   // local ACK timeout exponent: 4.096 us x 2^timeout
  int retry_cnt = 7;  // transport retries
};
// From CCL_IB_TIMEOUT and CCL_IB_RETRY_CNT; InvalidUsage outside 0..31 and 0..7.
QpTimeouts qp_timeouts_from_config();

// Throws SystemError naming the step when the provider refuses.
ibv_qp* create_rc_qp(const VerbsApi& api, ibv_pd* pd, ibv_cq* cq, uint32_t send_depth,
                     uint32_t recv_depth);
void qp_to_init(const VerbsApi& api, ibv_qp* qp, const IbPort& port);
void qp_to_rtr(const VerbsApi& api, ibv_qp* qp, const IbPort& port, const RemoteQp& remote);
void qp_to_rts(const VerbsApi& api, ibv_qp* qp, uint32_t psn, const QpTimeouts& timeouts);

}  // namespace ccl::transport::ib
