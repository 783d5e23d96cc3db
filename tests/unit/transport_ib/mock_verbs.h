// A fake verbs provider for the ib transport's tests: the function table of verbs_api.h over an
// in-process fabric, so that ranks on threads exchange RDMA writes with the semantics the
// transport relies on, and with the checks a real HCA makes:
//   devices and ports as configured (InfiniBand with a LID, or Ethernet with a GID table);
//   PDs; MRs with distinct lkeys and rkeys, checked (key, PD, access, bounds) on every access;
//   CQs with a completion channel whose fd is an eventfd, armed by req_notify_cq;
//   RC QPs with the state machine of the verbs spec (modify_qp refuses an illegal transition and
//   a missing or extra attribute; post_send only in RTS, post_recv from INIT, a QP in ERR flushes
//   what is posted), addressed by LID or GID plus QP number, with PSNs checked;
//   RDMA write = copy into the target MR; write with immediate also takes a posted receive of
//   the target and completes it with the immediate; no receive posted = RNR (retried forever
//   with rnr_retry 7, else IBV_WC_RNR_RETRY_EXC_ERR);
//   faults: a QP or a whole "process" (the contexts a thread opened after set_thread_process)
//   killed: writes to it then fail with IBV_WC_RETRY_EXC_ERR and the writer's QP goes to ERR,
//   flushing its other work (IBV_WC_WR_FLUSH_ERR).
// Operations complete when posted (no latency); one mutex serializes the fabric.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "transport/ib/verbs_api.h"

namespace ccl::transport::ib::mock {

struct MockGid {
  ibv_gid gid{};
  std::string type = "RoCE v2";  // as sysfs writes it: "RoCE v2", "IB/RoCE v1"
};
ibv_gid gid_of(const std::string& address);  // "::ffff:10.0.0.1", "fe80::1", "fd00::2"

struct MockPort {
  bool ethernet = false;
  ibv_port_state state = IBV_PORT_ACTIVE;
  uint16_t lid = 1;
  ibv_mtu mtu = IBV_MTU_4096;
  std::vector<MockGid> gids;  // Ethernet; an InfiniBand port gets one fe80:: GID
};

struct MockDevice {
  std::string name;
  std::vector<MockPort> ports;  // port 1 first
  int max_qp_wr = 1024;         // what query_device reports and create_qp allows
  int max_cqe = 1 << 16;        // what query_device reports and create_cq allows
};

// Counts the tests check.
struct MockStats {
  uint64_t reg_mr = 0;  // successful registrations (reg_dmabuf_mr's too)
  uint64_t dereg_mr = 0;
  uint64_t reg_dmabuf_mr = 0;  // of them, through a dmabuf (GPUDirect RDMA)
  int last_dmabuf_fd = -1;     // the fd, offset, length and iova of the last one
  uint64_t last_dmabuf_offset = 0, last_dmabuf_length = 0, last_dmabuf_iova = 0;
  uint64_t writes = 0;  // RDMA writes executed
  uint64_t largest_write = 0;
  std::map<uint32_t, uint64_t> bytes_by_qp;  // data bytes written, by source QP number
};

class MockVerbs {
 public:
  // Installs itself as the verbs table (install_verbs_api_for_tests); one at a time.
  MockVerbs();
  // Uninstalls. The transports using it must be gone.
  ~MockVerbs();
  MockVerbs(const MockVerbs&) = delete;
  MockVerbs& operator=(const MockVerbs&) = delete;

  void add_device(const MockDevice& device);
  const VerbsApi& api() const;

  // The contexts the calling thread opens from now on belong to `process` (default 0).
  static void set_thread_process(int process);
  void kill_process(int process);
  void kill_qp(uint32_t qp_num);

  // Objects not yet destroyed: contexts, PDs, MRs, channels, CQs, QPs.
  size_t live_objects() const;
  size_t live_mrs() const;
  MockStats stats() const;
  std::vector<uint32_t> qps_of(int process) const;
  ibv_qp_state qp_state(uint32_t qp_num) const;
  // An MR covering [addr, addr + len) exists (with a key the given access allows).
  bool registered(const void* addr, size_t len) const;

  // A sysfs tree under `root` (class/infiniband/<dev>/ports/<n>/{gids,gid_attrs/types}) that
  // says what the configured ports have.
  void write_sysfs(const std::string& root) const;
};

}  // namespace ccl::transport::ib::mock
