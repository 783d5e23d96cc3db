// The fabric semantics of the mock (mock_verbs.h) and MockVerbs itself.
#include "mock_fabric.h"

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ccl::transport::ib::mock {
namespace {

Fabric* g_fabric = nullptr;
thread_local int t_process = 0;

bool same_gid(const ibv_gid& a, const ibv_gid& b) { return std::memcmp(a.raw, b.raw, 16) == 0; }

std::string sysfs_gid_text(const ibv_gid& gid) {
  char text[48];
  std::snprintf(text, sizeof(text),
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                gid.raw[0], gid.raw[1], gid.raw[2], gid.raw[3], gid.raw[4], gid.raw[5], gid.raw[6],
                gid.raw[7], gid.raw[8], gid.raw[9], gid.raw[10], gid.raw[11], gid.raw[12],
                gid.raw[13], gid.raw[14], gid.raw[15]);
  return text;
}

}  // namespace

int current_process() { return t_process; }

Fabric& fabric() {
  if (g_fabric == nullptr) throw std::logic_error("mock verbs used without a MockVerbs");
  return *g_fabric;
}

ibv_gid gid_of(const std::string& address) {
  ibv_gid gid{};
  if (inet_pton(AF_INET6, address.c_str(), gid.raw) != 1) {
    throw std::invalid_argument("not an IPv6 address: " + address);
  }
  return gid;
}

MMr* Fabric::mr_by_lkey(uint32_t lkey) {
  for (auto& [p, mr] : mrs) {
    if (mr->mr.lkey == lkey) return mr.get();
  }
  return nullptr;
}

MMr* Fabric::mr_by_rkey(uint32_t rkey) {
  for (auto& [p, mr] : mrs) {
    if (mr->mr.rkey == rkey) return mr.get();
  }
  return nullptr;
}

const MockPort* Fabric::port_of(const MQp& qp) const {
  const auto& ports = qp.owner->device->config.ports;
  if (qp.port < 1 || qp.port > static_cast<int>(ports.size())) return nullptr;
  return &ports[qp.port - 1];
}

void Fabric::complete(MCq* cq, const ibv_wc& wc, int64_t sq_index) {
  if (cq->entries.size() >= cq->capacity) {
    cq->overflowed = true;  // a real CQ raises IBV_EVENT_CQ_ERR; poll_cq then fails
    return;
  }
  cq->entries.push_back(MCompletion{wc, sq_index});
  if (cq->armed && cq->channel != nullptr) {
    cq->armed = false;
    cq->channel->events.push_back(cq);
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(cq->channel->channel.fd, &one, sizeof(one));
  }
}

void Fabric::fail_send(MQp* qp, const MSendWr& wr, ibv_wc_status status) {
  ibv_wc wc{};
  wc.wr_id = wr.wr.wr_id;
  wc.status = status;
  wc.qp_num = qp->qp.qp_num;
  wc.vendor_err = 0x81;
  complete(qp->send_cq, wc, wr.sq_index);
}

void Fabric::to_error(MQp* qp) {
  qp->state = IBV_QPS_ERR;
  if (qp->dead) {
    qp->recvs.clear();
    qp->stalled.clear();
    return;
  }
  for (const MSendWr& wr : qp->stalled) fail_send(qp, wr, IBV_WC_WR_FLUSH_ERR);
  qp->stalled.clear();
  for (uint64_t id : qp->recvs) {
    ibv_wc wc{};
    wc.wr_id = id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.qp_num = qp->qp.qp_num;
    complete(qp->recv_cq, wc);
  }
  qp->recvs.clear();
}

bool Fabric::execute(MQp* qp, const MSendWr& w) {
  const ibv_send_wr& wr = w.wr;
  // The local gather list: keys of this PD, inside their MRs.
  uint64_t length = 0;
  for (const ibv_sge& sge : w.sges) {
    MMr* mr = mr_by_lkey(sge.lkey);
    const uint64_t base = reinterpret_cast<uintptr_t>(mr ? mr->mr.addr : nullptr);
    if (mr == nullptr || mr->pd != qp->pd || sge.addr < base ||
        sge.addr + sge.length > base + mr->mr.length) {
      fail_send(qp, w, IBV_WC_LOC_PROT_ERR);
      to_error(qp);
      return true;
    }
    length += sge.length;
  }
  // The target: the QP number of the path, at the port the LID or GID names, connected back.
  auto it = qps.find(qp->dest_qpn);
  MQp* target = it == qps.end() ? nullptr : it->second.get();
  bool reachable = target != nullptr && !target->dead && !target->owner->dead &&
                   target->dest_qpn == qp->qp.qp_num &&
                   (target->state == IBV_QPS_RTR || target->state == IBV_QPS_RTS);
  if (reachable) {
    const MockPort* port = port_of(*target);
    if (qp->ah.is_global) {
      bool found = false;
      for (const MockGid& g : port->gids) found |= same_gid(g.gid, qp->ah.grh.dgid);
      reachable = found;
    } else {
      reachable = !port->ethernet && port->lid == qp->ah.dlid;
    }
  }
  // A wrong PSN is a sequence error the requester retries until it gives up.
  if (reachable && target->rq_psn != qp->sq_psn) reachable = false;
  if (!reachable) {
    fail_send(qp, w, IBV_WC_RETRY_EXC_ERR);
    to_error(qp);
    return true;
  }
  const bool with_imm = wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (with_imm && target->recvs.empty()) {
    if (qp->rnr_retry == 7) return false;
    fail_send(qp, w, IBV_WC_RNR_RETRY_EXC_ERR);
    to_error(qp);
    return true;
  }
  // The remote side (a zero-length write touches no memory and checks no key).
  std::byte* dest = nullptr;
  if (length > 0) {
    MMr* mr = mr_by_rkey(wr.wr.rdma.rkey);
    const uint64_t base = reinterpret_cast<uintptr_t>(mr ? mr->mr.addr : nullptr);
    if (mr == nullptr || mr->pd != target->pd || !(mr->access & IBV_ACCESS_REMOTE_WRITE) ||
        !(target->access & IBV_ACCESS_REMOTE_WRITE) || wr.wr.rdma.remote_addr < base ||
        wr.wr.rdma.remote_addr + length > base + mr->mr.length) {
      fail_send(qp, w, IBV_WC_REM_ACCESS_ERR);
      to_error(qp);
      return true;
    }
    dest = reinterpret_cast<std::byte*>(wr.wr.rdma.remote_addr);
  }
  for (const ibv_sge& sge : w.sges) {
    std::memcpy(dest, reinterpret_cast<const void*>(sge.addr), sge.length);
    dest += sge.length;
  }
  ++qp->sq_psn;
  ++target->rq_psn;
  ++stats.writes;
  stats.largest_write = std::max(stats.largest_write, length);
  stats.bytes_by_qp[qp->qp.qp_num] += length;
  if (with_imm) {
    ibv_wc wc{};
    wc.wr_id = target->recvs.front();
    target->recvs.pop_front();
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.byte_len = static_cast<uint32_t>(length);
    wc.imm_data = wr.imm_data;
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.qp_num = target->qp.qp_num;
    wc.src_qp = qp->qp.qp_num;
    complete(target->recv_cq, wc);
  }
  if (qp->sig_all || (wr.send_flags & IBV_SEND_SIGNALED)) {
    ibv_wc wc{};
    wc.wr_id = wr.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RDMA_WRITE;
    wc.qp_num = qp->qp.qp_num;
    complete(qp->send_cq, wc, w.sq_index);
  }
  return true;
}

void Fabric::retry_stalled(uint32_t target) {
  for (auto& [qpn, qp] : qps) {
    if (qp->dest_qpn != target || qp->stalled.empty() || qp->state != IBV_QPS_RTS) continue;
    while (!qp->stalled.empty() && qp->state == IBV_QPS_RTS) {
      MSendWr w = qp->stalled.front();
      qp->stalled.pop_front();
      if (!execute(qp.get(), w)) {
        qp->stalled.push_front(w);
        break;
      }
    }
  }
}

MockVerbs::MockVerbs() {
  if (g_fabric != nullptr) throw std::logic_error("one MockVerbs at a time");
  g_fabric = new Fabric();
  fill_api(&g_fabric->api);
  install_verbs_api_for_tests(&g_fabric->api);
}

MockVerbs::~MockVerbs() {
  install_verbs_api_for_tests(nullptr);
  for (auto& [p, ch] : g_fabric->channels) ::close(ch->channel.fd);
  delete g_fabric;
  g_fabric = nullptr;
}

void MockVerbs::add_device(const MockDevice& config) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  auto d = std::make_unique<MDevice>();
  d->config = config;
  for (MockPort& p : d->config.ports) {
    if (!p.ethernet && p.gids.empty()) {
      p.gids.push_back(MockGid{gid_of("fe80::" + std::to_string(p.lid)), "IB/RoCE v1"});
    }
  }
  std::snprintf(d->device.name, sizeof(d->device.name), "%s", config.name.c_str());
  std::snprintf(d->device.dev_name, sizeof(d->device.dev_name), "uverbs%zu", f.devices.size());
  d->device.node_type = IBV_NODE_CA;
  d->device.transport_type = IBV_TRANSPORT_IB;
  f.devices.push_back(std::move(d));
}

const VerbsApi& MockVerbs::api() const { return fabric().api; }

void MockVerbs::set_thread_process(int process) { t_process = process; }

void MockVerbs::kill_process(int process) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  std::vector<uint32_t> victims;
  for (auto& [c, ctx] : f.contexts) {
    if (ctx->process == process) ctx->dead = true;
  }
  for (auto& [qpn, qp] : f.qps) {
    if (qp->owner->dead) {
      qp->dead = true;
      f.to_error(qp.get());
      victims.push_back(qpn);
    }
  }
  for (uint32_t qpn : victims) f.retry_stalled(qpn);  // their writers' stalled writes now fail
}

void MockVerbs::kill_qp(uint32_t qp_num) {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  auto it = f.qps.find(qp_num);
  if (it == f.qps.end()) return;
  it->second->dead = true;
  f.to_error(it->second.get());
  f.retry_stalled(qp_num);
}

size_t MockVerbs::live_objects() const {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  return f.contexts.size() + f.pds.size() + f.mrs.size() + f.channels.size() + f.cqs.size() +
         f.qps.size();
}

size_t MockVerbs::live_mrs() const {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  return f.mrs.size();
}

MockStats MockVerbs::stats() const {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  return f.stats;
}

std::vector<uint32_t> MockVerbs::qps_of(int process) const {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  std::vector<uint32_t> out;
  for (auto& [qpn, qp] : f.qps) {
    if (qp->owner->process == process) out.push_back(qpn);
  }
  return out;
}

ibv_qp_state MockVerbs::qp_state(uint32_t qp_num) const {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  auto it = f.qps.find(qp_num);
  return it == f.qps.end() ? IBV_QPS_UNKNOWN : it->second->state;
}

bool MockVerbs::registered(const void* addr, size_t len) const {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (auto& [p, mr] : f.mrs) {
    const auto base = reinterpret_cast<uintptr_t>(mr->mr.addr);
    if (base <= a && a + len <= base + mr->mr.length) return true;
  }
  return false;
}

void MockVerbs::write_sysfs(const std::string& root) const {
  Fabric& f = fabric();
  std::lock_guard<std::mutex> lock(f.mutex);
  namespace fs = std::filesystem;
  for (const auto& d : f.devices) {
    for (size_t p = 0; p < d->config.ports.size(); ++p) {
      const fs::path dir =
          fs::path(root) / "class/infiniband" / d->config.name / "ports" / std::to_string(p + 1);
      fs::create_directories(dir / "gids");
      fs::create_directories(dir / "gid_attrs/types");
      const auto& gids = d->config.ports[p].gids;
      for (size_t i = 0; i < gids.size(); ++i) {
        std::ofstream(dir / "gids" / std::to_string(i)) << sysfs_gid_text(gids[i].gid) << "\n";
        std::ofstream(dir / "gid_attrs/types" / std::to_string(i)) << gids[i].type << "\n";
      }
    }
  }
}

}  // namespace ccl::transport::ib::mock
