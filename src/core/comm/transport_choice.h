// Which transport each pair of ranks uses (the communicator's peers, peers.cc): shared memory
// inside a host, and between hosts (or inside one with CCL_SHM_DISABLE=1) a network transport
// both ranks can use. Each rank offers the network transports it can run, in its order of
// preference, after CCL_NET; a pair takes the first of the lower rank's offer that the higher rank
// also offers, so both ends pick the same without another exchange. Pure functions: the probes'
// answers come in as data (tested in tests/unit/comm/transport_choice_test.cc).
//
// CCL_NET: unset or empty: every transport this host can run, in ccl's order (ib, ucx, tcp), ucx
// only where it has a network beyond tcp (NetAvailability::by_default). A list ("ucx,tcp"):
// exactly these, in this order, and each must be available (else init fails saying why). "^ib" or
// "^ib,ucx": the default without these.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/net_availability.h"

namespace ccl {

struct NetPolicy {
  std::vector<std::string> named;     // a list: the transports allowed, in preference order
  std::vector<std::string> excluded;  // "^...": left out of the default
  bool is_list() const { return !named.empty(); }
};

// Parses CCL_NET's value. Throws InvalidUsage naming CCL_NET for an unknown or repeated name, an
// empty item, or a "^" that excludes everything.
NetPolicy parse_net_policy(std::string_view text);

struct NetCandidate {
  std::string name;
  transport::NetAvailability availability;
};

// Probes the network transports `policy` lets this rank use (a list: those named; else all but
// the excluded), in ccl's order. Each probe may load a library or open a device.
std::vector<NetCandidate> probe_network_transports(const NetPolicy& policy);

// The transports this rank offers, in preference order, from the probes' answers (candidates in
// ccl's order; a name this build lacks is absent). A listed transport that is missing or not
// available throws InvalidUsage (absent from this build) or SystemError (its probe said no), with
// the probe's reason; an empty offer throws SystemError.
std::vector<std::string> net_offer(const NetPolicy& policy,
                                   std::span<const NetCandidate> candidates);

// The transport of a pair: the first of `lower`'s offer that `higher` offers too; "" when none.
std::string pair_transport(std::span<const std::string> lower, std::span<const std::string> higher);

// An offer as it travels through the store ("ucx,tcp"), and back.
std::string encode_offer(std::span<const std::string> offer);
std::vector<std::string> decode_offer(std::string_view text);

}  // namespace ccl
