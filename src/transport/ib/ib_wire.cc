#include "transport/ib/ib_wire.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "transport/transport.h"

namespace ccl::transport::ib {
namespace {

constexpr uint32_t kEndpointMagic = 0x63636c49;  // "cclI"
constexpr uint32_t kEndpointVersion = 1;
constexpr uint32_t kMax24Bit = (1u << 24) - 1;  // QP numbers and PSNs
constexpr uint16_t kMaxUnicastLid = 0xbfff;     // above: multicast and the permissive LID

struct Writer {
  std::vector<uint8_t> out;
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
};

struct Reader {
  const std::vector<uint8_t>& in;
  size_t at = 0;
  template <class T>
  T get() {
    if (in.size() - at < sizeof(T)) {
      throw_error(cclRemoteError, "ib: truncated connection record (%zu bytes)", in.size());
    }
    T v;
    std::memcpy(&v, in.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
};

// What the verbs would take from a peer's record: a path MTU of the ibv_mtu enum (256..4096
// bytes), 24-bit QP numbers and PSNs, and on InfiniBand a unicast LID (RoCE has none: 0).
// Anything else would reach ibv_modify_qp and fail there with a bare EINVAL, or worse.
void check_endpoint_ranges(const EndpointInfo& info) {
  if (info.mtu < IBV_MTU_256 || info.mtu > IBV_MTU_4096) {
    throw_error(cclRemoteError, "ib: connection record with path MTU code %u (expected %d..%d)",
                info.mtu, IBV_MTU_256, IBV_MTU_4096);
  }
  if (info.ethernet == 0 && (info.lid == 0 || info.lid > kMaxUnicastLid)) {
    throw_error(cclRemoteError, "ib: connection record with LID 0x%x (unicast LIDs are 0x1..0x%x)",
                info.lid, kMaxUnicastLid);
  }
  for (size_t i = 0; i < info.qpn.size(); ++i) {
    if (info.qpn[i] > kMax24Bit || info.psn[i] > kMax24Bit) {
      throw_error(cclRemoteError,
                  "ib: connection record with QP number 0x%x, PSN 0x%x (24 bits each)", info.qpn[i],
                  info.psn[i]);
    }
  }
}

}  // namespace

int stripe_count(uint64_t length, int qps) {
  const uint64_t by_size = std::max<uint64_t>(1, (length + kMinStripe - 1) / kMinStripe);
  return static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(std::max(qps, 1)), by_size));
}

void stripe_range(uint64_t length, int stripes, int index, uint64_t* begin, uint64_t* end) {
  uint64_t each = (length + stripes - 1) / stripes;
  each = (each + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
  *begin = std::min<uint64_t>(length, each * index);
  *end = index == stripes - 1 ? length : std::min<uint64_t>(length, each * (index + 1));
}

std::vector<uint8_t> encode_endpoint(const EndpointInfo& info) {
  Writer w;
  w.put(kEndpointMagic);
  w.put(kEndpointVersion);
  w.put(info.rank);
  w.put(info.peer);
  w.put(info.ethernet);
  w.put(info.mtu);
  w.put(info.lid);
  for (uint8_t b : info.gid) w.put(b);
  w.put(info.control_addr);
  w.put(info.control_rkey);
  w.put(static_cast<uint32_t>(info.qpn.size()));
  for (size_t i = 0; i < info.qpn.size(); ++i) {
    w.put(info.qpn[i]);
    w.put(info.psn[i]);
  }
  return std::move(w.out);
}

EndpointInfo decode_endpoint(const std::vector<uint8_t>& bytes) {
  Reader r{bytes};
  if (r.get<uint32_t>() != kEndpointMagic || r.get<uint32_t>() != kEndpointVersion) {
    throw_error(cclRemoteError, "ib: connection record of another kind or version");
  }
  EndpointInfo info;
  info.rank = r.get<int32_t>();
  info.peer = r.get<int32_t>();
  info.ethernet = r.get<uint8_t>();
  info.mtu = r.get<uint8_t>();
  info.lid = r.get<uint16_t>();
  for (uint8_t& b : info.gid) b = r.get<uint8_t>();
  info.control_addr = r.get<uint64_t>();
  info.control_rkey = r.get<uint32_t>();
  const uint32_t qps = r.get<uint32_t>();
  if (qps < 1 || qps > static_cast<uint32_t>(kMaxQpsPerConnection)) {
    throw_error(cclRemoteError, "ib: connection record with %u QPs", qps);
  }
  for (uint32_t i = 0; i < qps; ++i) {
    info.qpn.push_back(r.get<uint32_t>());
    info.psn.push_back(r.get<uint32_t>());
  }
  if (r.at != bytes.size()) throw_error(cclRemoteError, "ib: connection record too long");
  check_endpoint_ranges(info);
  return info;
}

}  // namespace ccl::transport::ib
