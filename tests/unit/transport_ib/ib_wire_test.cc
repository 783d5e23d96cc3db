// encode_endpoint / decode_endpoint: a peer's connection record, and what is refused in it
// before it reaches ibv_modify_qp.
#include "transport/ib/ib_wire.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <string>

#include "base/error.h"

namespace ccl::transport::ib {
namespace {

EndpointInfo good_record(bool ethernet) {
  EndpointInfo info;
  info.rank = 1;
  info.peer = 0;
  info.ethernet = ethernet ? 1 : 0;
  info.mtu = IBV_MTU_4096;
  info.lid = ethernet ? 0 : 7;
  info.gid[15] = 1;
  info.control_addr = 0x1000;
  info.control_rkey = 42;
  info.qpn = {0x123, 0xffffff};
  info.psn = {0, 0xabcdef};
  return info;
}

// The RemoteError's message when `info` goes through the wire, or "" when it decodes.
std::string refusal(const EndpointInfo& info) {
  try {
    decode_endpoint(encode_endpoint(info));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclRemoteError);
    return e.what();
  }
  return "";
}

TEST(IbWire, ARecordRoundTrips) {
  for (bool ethernet : {false, true}) {
    const EndpointInfo in = good_record(ethernet);
    const EndpointInfo out = decode_endpoint(encode_endpoint(in));
    EXPECT_EQ(out.rank, in.rank);
    EXPECT_EQ(out.peer, in.peer);
    EXPECT_EQ(out.ethernet, in.ethernet);
    EXPECT_EQ(out.mtu, in.mtu);
    EXPECT_EQ(out.lid, in.lid);
    EXPECT_EQ(out.gid[15], 1);
    EXPECT_EQ(out.control_addr, in.control_addr);
    EXPECT_EQ(out.control_rkey, in.control_rkey);
    EXPECT_EQ(out.qpn, in.qpn);
    EXPECT_EQ(out.psn, in.psn);
  }
}

TEST(IbWire, AnMtuOutsideTheVerbsEnumIsRefused) {
  for (uint8_t mtu : {uint8_t{0}, uint8_t{6}, uint8_t{255}}) {
    EndpointInfo info = good_record(false);
    info.mtu = mtu;
    EXPECT_NE(refusal(info).find("path MTU code " + std::to_string(mtu)), std::string::npos);
  }
}

TEST(IbWire, AnInfiniBandRecordNeedsAUnicastLid) {
  for (uint16_t lid : {uint16_t{0}, uint16_t{0xc000}, uint16_t{0xffff}}) {
    EndpointInfo info = good_record(false);
    info.lid = lid;
    EXPECT_NE(refusal(info).find("LID"), std::string::npos) << lid;
  }
  EndpointInfo roce = good_record(true);  // RoCE addresses by GID: its LID is 0
  EXPECT_EQ(refusal(roce), "");
}

TEST(IbWire, QpNumbersAndPsnsHave24Bits) {
  EndpointInfo info = good_record(false);
  info.qpn[1] = 0x1000000;
  EXPECT_NE(refusal(info).find("QP number 0x1000000"), std::string::npos);
  info = good_record(false);
  info.psn[0] = 0xff000000;
  EXPECT_NE(refusal(info).find("PSN 0xff000000"), std::string::npos);
}

TEST(IbWire, TruncatedOrForeignBytesAreRefused) {
  std::vector<uint8_t> bytes = encode_endpoint(good_record(false));
  bytes.pop_back();
  EXPECT_THROW(decode_endpoint(bytes), Error);
  bytes = encode_endpoint(good_record(false));
  bytes[0] ^= 0xff;
  EXPECT_THROW(decode_endpoint(bytes), Error);
}

}  // namespace
}  // namespace ccl::transport::ib
