// The mock's verbs functions (mock_verbs.h): objects, the QP state machine, posting and polling.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mock_fabric.h"

namespace ccl::transport::ib::mock {

int current_process();

namespace {

using Lock = std::lock_guard<std::mutex>;

constexpr int kMaxSge = 4;

template <class T>
T* fail_null(int err) {
  errno = err;
  return nullptr;
}

// ---- devices ----

ibv_device** get_device_list(int* num) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto** list = new ibv_device*[f.devices.size() + 1];
  for (size_t i = 0; i < f.devices.size(); ++i) list[i] = &f.devices[i]->device;
  list[f.devices.size()] = nullptr;
  if (num != nullptr) *num = static_cast<int>(f.devices.size());
  return list;
}

void free_device_list(ibv_device** list) { delete[] list; }

const char* get_device_name(ibv_device* device) { return device->name; }

MDevice* device_of(ibv_device* device) { return reinterpret_cast<MDevice*>(device); }

ibv_context* open_device(ibv_device* device) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto c = std::make_unique<MContext>();
  c->device = device_of(device);
  c->process = current_process();
  c->context.device = device;
  c->context.num_comp_vectors = 1;
  ibv_context* handle = &c->context;
  f.contexts.emplace(handle, std::move(c));
  return handle;
}

int close_device(ibv_context* context) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  for (auto& [p, pd] : f.pds) {
    if (&pd->owner->context == context) return EBUSY;
  }
  for (auto& [p, ch] : f.channels) {
    if (ch->channel.context == context) return EBUSY;
  }
  for (auto& [p, cq] : f.cqs) {
    if (cq->cq.context == context) return EBUSY;
  }
  return f.contexts.erase(context) == 1 ? 0 : EINVAL;
}

MContext* context_of(ibv_context* context) {
  auto it = fabric().contexts.find(context);
  return it == fabric().contexts.end() ? nullptr : it->second.get();
}

int query_device(ibv_context* context, ibv_device_attr* attr) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  MContext* c = context_of(context);
  if (c == nullptr) return EINVAL;
  std::memset(attr, 0, sizeof(*attr));
  attr->phys_port_cnt = static_cast<uint8_t>(c->device->config.ports.size());
  attr->max_qp_wr = c->device->config.max_qp_wr;
  attr->max_cqe = c->device->config.max_cqe;
  attr->max_sge = kMaxSge;
  attr->max_qp = 4096;
  attr->max_mr_size = ~0ull;
  return 0;
}

int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  MContext* c = context_of(context);
  if (c == nullptr || port < 1 || port > c->device->config.ports.size()) return EINVAL;
  const MockPort& p = c->device->config.ports[port - 1];
  std::memset(attr, 0, sizeof(*attr));
  attr->state = p.state;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = p.mtu;
  attr->lid = p.ethernet ? 0 : p.lid;
  attr->link_layer = p.ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  attr->gid_tbl_len = static_cast<int>(p.gids.size());
  attr->max_msg_sz = 1u << 31;
  return 0;
}

int query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  MContext* c = context_of(context);
  if (c == nullptr || port < 1 || port > c->device->config.ports.size()) return EINVAL;
  const MockPort& p = c->device->config.ports[port - 1];
  if (index < 0 || index >= static_cast<int>(p.gids.size())) return EINVAL;
  *gid = p.gids[index].gid;
  return 0;
}

// ---- PDs and MRs ----

ibv_pd* alloc_pd(ibv_context* context) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  MContext* c = context_of(context);
  if (c == nullptr) return fail_null<ibv_pd>(EINVAL);
  auto pd = std::make_unique<MPd>();
  pd->owner = c;
  pd->pd.context = context;
  ibv_pd* handle = &pd->pd;
  f.pds.emplace(handle, std::move(pd));
  return handle;
}

int dealloc_pd(ibv_pd* pd) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto it = f.pds.find(pd);
  if (it == f.pds.end()) return EINVAL;
  for (auto& [p, mr] : f.mrs) {
    if (mr->pd == it->second.get()) return EBUSY;
  }
  for (auto& [n, qp] : f.qps) {
    if (qp->pd == it->second.get()) return EBUSY;
  }
  f.pds.erase(it);
  return 0;
}

ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto it = f.pds.find(pd);
  if (it == f.pds.end()) return fail_null<ibv_mr>(EINVAL);
  // The verbs rule: remote write needs local write.
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return fail_null<ibv_mr>(EINVAL);
  if (addr == nullptr && length > 0) return fail_null<ibv_mr>(EFAULT);
  auto mr = std::make_unique<MMr>();
  mr->pd = it->second.get();
  mr->access = access;
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.lkey = f.next_key;
  mr->mr.rkey = f.next_key + 0x10000001;  // never an lkey: a swapped key is caught
  f.next_key += 2;
  ibv_mr* handle = &mr->mr;
  f.mrs.emplace(handle, std::move(mr));
  ++f.stats.reg_mr;
  return handle;
}

// As the provider: the fd must be a live descriptor (fcntl), the access as reg_mr's; the MR's
// address is the iova (where the owner sees the memory).
ibv_mr* reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                      int access) {
  if (fd < 0 || fcntl(fd, F_GETFD) < 0) return fail_null<ibv_mr>(EBADF);
  ibv_mr* mr = reg_mr(pd, reinterpret_cast<void*>(iova), length, access);
  if (mr == nullptr) return nullptr;
  Fabric& f = fabric();
  Lock lock(f.mutex);
  ++f.stats.reg_dmabuf_mr;
  f.stats.last_dmabuf_fd = fd;
  f.stats.last_dmabuf_offset = offset;
  f.stats.last_dmabuf_length = length;
  f.stats.last_dmabuf_iova = iova;
  return mr;
}

int dereg_mr(ibv_mr* mr) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  if (f.mrs.erase(mr) != 1) return EINVAL;
  ++f.stats.dereg_mr;
  return 0;
}

// ---- completion channels and CQs ----

ibv_comp_channel* create_comp_channel(ibv_context* context) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  if (context_of(context) == nullptr) return fail_null<ibv_comp_channel>(EINVAL);
  auto ch = std::make_unique<MChannel>();
  ch->channel.context = context;
  ch->channel.fd = ::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (ch->channel.fd < 0) return nullptr;
  ibv_comp_channel* handle = &ch->channel;
  f.channels.emplace(handle, std::move(ch));
  return handle;
}

int destroy_comp_channel(ibv_comp_channel* channel) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto it = f.channels.find(channel);
  if (it == f.channels.end()) return EINVAL;
  for (auto& [p, cq] : f.cqs) {
    if (cq->channel == it->second.get()) return EBUSY;
  }
  ::close(channel->fd);
  f.channels.erase(it);
  return 0;
}

ibv_cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                  int comp_vector) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  if (context_of(context) == nullptr || cqe < 1 ||
      cqe > context_of(context)->device->config.max_cqe || comp_vector != 0)
    return fail_null<ibv_cq>(EINVAL);
  MChannel* ch = nullptr;
  if (channel != nullptr) {
    auto it = f.channels.find(channel);
    if (it == f.channels.end()) return fail_null<ibv_cq>(EINVAL);
    ch = it->second.get();
  }
  auto cq = std::make_unique<MCq>();
  cq->channel = ch;
  cq->capacity = static_cast<size_t>(cqe);
  cq->cq.context = context;
  cq->cq.channel = channel;
  cq->cq.cq_context = cq_context;
  cq->cq.cqe = cqe;
  ibv_cq* handle = &cq->cq;
  f.cqs.emplace(handle, std::move(cq));
  return handle;
}

int destroy_cq(ibv_cq* cq) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto it = f.cqs.find(cq);
  if (it == f.cqs.end()) return EINVAL;
  for (auto& [n, qp] : f.qps) {
    if (qp->send_cq == it->second.get() || qp->recv_cq == it->second.get()) return EBUSY;
  }
  // rdma-core blocks until every event is acknowledged; the mock refuses instead.
  if (it->second->unacked_events != 0) return EBUSY;
  if (MChannel* ch = it->second->channel) {
    std::erase(ch->events, it->second.get());
  }
  f.cqs.erase(it);
  return 0;
}

int req_notify_cq(ibv_cq* cq, int /*solicited_only*/) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto it = f.cqs.find(cq);
  if (it == f.cqs.end()) return EINVAL;
  it->second->armed = true;
  return 0;
}

int get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  // The read blocks or not as the fd's flags say, as a real channel's does.
  uint64_t count = 0;
  if (::read(channel->fd, &count, sizeof(count)) != sizeof(count)) return -1;
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto it = f.channels.find(channel);
  if (it == f.channels.end() || it->second->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  MCq* m = it->second->events.front();
  it->second->events.pop_front();
  ++m->unacked_events;
  *cq = &m->cq;
  *cq_context = m->cq.cq_context;
  return 0;
}

void ack_cq_events(ibv_cq* cq, unsigned int count) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto it = f.cqs.find(cq);
  if (it == f.cqs.end()) return;
  it->second->unacked_events -= std::min(count, it->second->unacked_events);
}

int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto it = f.cqs.find(cq);
  if (it == f.cqs.end() || it->second->overflowed) return -1;
  int n = 0;
  auto& entries = it->second->entries;
  while (n < num_entries && !entries.empty()) {
    const MCompletion c = entries.front();
    entries.pop_front();
    if (c.sq_index >= 0) {
      auto q = f.qps.find(c.wc.qp_num);
      if (q != f.qps.end()) q->second->sq_retired = std::max(q->second->sq_retired, c.sq_index + 1);
    }
    wc[n++] = c.wc;
  }
  return n;
}

}  // namespace

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr);
int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask);
int destroy_qp(ibv_qp* qp);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);

void fill_api(VerbsApi* api) {
  api->get_device_list = get_device_list;
  api->free_device_list = free_device_list;
  api->get_device_name = get_device_name;
  api->open_device = open_device;
  api->close_device = close_device;
  api->query_device = query_device;
  api->query_port = query_port;
  api->query_gid = query_gid;
  api->alloc_pd = alloc_pd;
  api->dealloc_pd = dealloc_pd;
  api->reg_mr = reg_mr;
  api->dereg_mr = dereg_mr;
  api->reg_dmabuf_mr = reg_dmabuf_mr;
  api->create_comp_channel = create_comp_channel;
  api->destroy_comp_channel = destroy_comp_channel;
  api->create_cq = create_cq;
  api->destroy_cq = destroy_cq;
  api->req_notify_cq = req_notify_cq;
  api->get_cq_event = get_cq_event;
  api->ack_cq_events = ack_cq_events;
  api->create_qp = create_qp;
  api->modify_qp = modify_qp;
  api->destroy_qp = destroy_qp;
  api->post_send = post_send;
  api->post_recv = post_recv;
  api->poll_cq = poll_cq;
}

}  // namespace ccl::transport::ib::mock
