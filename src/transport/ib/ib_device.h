// The verbs resources one transport holds for its whole life: the opened device of the port it
// uses, a protection domain, and one completion channel that every connection's CQ reports to
// (so wait() sleeps on one descriptor). Opened at construction so that register_memory works
// before any connection exists.
#pragma once

#include <infiniband/verbs.h>

#include "transport/ib/ib_devices.h"
#include "transport/ib/verbs_api.h"

namespace ccl::transport::ib {

class IbDevice {
 public:
  // Throws SystemError when the device cannot be opened or set up.
  IbDevice(const VerbsApi& api, IbPort port);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  const VerbsApi& api() const { return api_; }
  const IbPort& port() const { return port_; }
  const ibv_device_attr& attr() const { return attr_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  ibv_comp_channel* channel() const { return channel_; }  // its fd is non-blocking

 private:
  void release();

  const VerbsApi& api_;
  IbPort port_;
  ibv_device_attr attr_{};
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
};

}  // namespace ccl::transport::ib
