// Which ranks share a host (and so may use shared memory): the hostname plus the kernel's boot
// id, so two containers or VMs with the same hostname are told apart; CCL_HOSTID overrides it
// (tests use it to make one machine look like several nodes).
#pragma once

#include <string>

namespace ccl {

std::string host_id();

}  // namespace ccl
