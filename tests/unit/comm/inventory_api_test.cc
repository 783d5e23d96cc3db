// The inventory queries tools use (ccl-check): the transport per peer and the topology text.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "ccl/ccl.hpp"

namespace {

TEST(Inventory, PeerTransportNamesEveryPeerAndSelf) {
  constexpr int kRanks = 3;
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<cclComm_t> comms(kRanks, nullptr);
  std::vector<std::vector<std::string>> names(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      if (cclCommInitRank(&comms[r], kRanks, id, r) != cclSuccess) return;
      for (int p = 0; p < kRanks; ++p) {
        const char* name = nullptr;
        if (cclCommPeerTransport(comms[r], p, &name) == cclSuccess && name != nullptr) {
          names[r].emplace_back(name);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_NE(comms[r], nullptr) << "rank " << r;
    ASSERT_EQ(names[r].size(), static_cast<size_t>(kRanks)) << "rank " << r;
    for (int p = 0; p < kRanks; ++p) {
      // Ranks of one process share memory: shm (or loopback where /dev/shm is not usable).
      if (p == r) {
        EXPECT_EQ(names[r][p], "self");
      } else {
        EXPECT_TRUE(names[r][p] == "shm" || names[r][p] == "loopback") << names[r][p];
        EXPECT_EQ(names[r][p], names[p][r]) << "a pair's two ends name one transport";
      }
    }
  }
  // Bad arguments are refused with a message, never a crash.
  const char* name = nullptr;
  EXPECT_EQ(cclCommPeerTransport(comms[0], kRanks, &name), cclInvalidArgument);
  EXPECT_NE(std::string(cclGetLastError(comms[0])).find("peer 3"), std::string::npos)
      << cclGetLastError(comms[0]);
  EXPECT_EQ(cclCommPeerTransport(comms[0], -1, &name), cclInvalidArgument);
  EXPECT_EQ(cclCommPeerTransport(comms[0], 0, nullptr), cclInvalidArgument);
  EXPECT_EQ(cclCommPeerTransport(nullptr, 0, &name), cclInvalidArgument);
  // The C++ API.
  ccl::Communicator borrowed(comms[1]);
  EXPECT_EQ(borrowed.peer_transport(1), "self");
  EXPECT_THROW(borrowed.peer_transport(7), ccl::Error);
  borrowed.release();
  for (cclComm_t c : comms) EXPECT_EQ(cclCommDestroy(c), cclSuccess);
}

TEST(Inventory, TopologyTextIsCcltoposAndCutsShortSafely) {
  size_t length = 0;
  ASSERT_EQ(cclGetTopologyText(nullptr, 0, &length), cclSuccess);
  ASSERT_GT(length, 0u);
  std::string text(length + 1, 'x');
  size_t again = 0;
  ASSERT_EQ(cclGetTopologyText(text.data(), text.size(), &again), cclSuccess);
  EXPECT_EQ(again, length);
  EXPECT_EQ(text[length], '\0');
  text.resize(length);
  EXPECT_EQ(text.rfind("machine", 0), 0u) << text;  // the tree's root comes first
  EXPECT_NE(text.find("ring order:"), std::string::npos) << text;
  // Cut short: NUL-terminated within size.
  char small[8];
  std::memset(small, 'x', sizeof small);
  ASSERT_EQ(cclGetTopologyText(small, sizeof small, nullptr), cclSuccess);
  EXPECT_EQ(std::string(small), text.substr(0, 7));
  EXPECT_EQ(cclGetTopologyText(nullptr, 4, &length), cclInvalidArgument);
  EXPECT_EQ(ccl::topology_text(), text);
}

}  // namespace
