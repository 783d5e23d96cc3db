#include "transport/ib/ib_device.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace ccl::transport::ib {

IbDevice::IbDevice(const VerbsApi& api, IbPort port) : api_(api), port_(std::move(port)) {
  int count = 0;
  ibv_device** list = api_.get_device_list(&count);
  if (list == nullptr) throw_system_error(errno, "ib: get_device_list");
  for (int i = 0; i < count && context_ == nullptr; ++i) {
    if (port_.device == api_.get_device_name(list[i])) context_ = api_.open_device(list[i]);
  }
  const int open_errno = errno;
  api_.free_device_list(list);
  try {
    if (context_ == nullptr) {
      throw_error(cclSystemError, "ib: cannot open device %s: %s", port_.device.c_str(),
                  std::strerror(open_errno));
    }
    int rc = api_.query_device(context_, &attr_);
    if (rc != 0) throw_system_error(rc, "ib: query_device(%s)", port_.device.c_str());
    pd_ = api_.alloc_pd(context_);
    if (pd_ == nullptr) throw_system_error(errno, "ib: alloc_pd(%s)", port_.device.c_str());
    channel_ = api_.create_comp_channel(context_);
    if (channel_ == nullptr) throw_system_error(errno, "ib: create_comp_channel");
    int flags = ::fcntl(channel_->fd, F_GETFL);
    if (flags < 0 || ::fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      throw_system_error(errno, "ib: completion channel fd");
    }
  } catch (...) {
    release();
    throw;
  }
}

IbDevice::~IbDevice() { release(); }

void IbDevice::release() {
  if (channel_ != nullptr) api_.destroy_comp_channel(channel_);
  if (pd_ != nullptr) api_.dealloc_pd(pd_);
  if (context_ != nullptr) api_.close_device(context_);
  channel_ = nullptr;
  pd_ = nullptr;
  context_ = nullptr;
}

}  // namespace ccl::transport::ib
