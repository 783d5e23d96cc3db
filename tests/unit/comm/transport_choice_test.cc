// The transport each pair of ranks uses (core/comm/transport_choice.h): CCL_NET's syntax, each
// rank's offer from the probes' answers, the pair's choice, and communicators whose CCL_NET asks
// for a transport that cannot run (init fails on every rank, saying why).
#include "core/comm/transport_choice.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "ccl/ccl.h"
#include "transport/network_transports.h"

namespace ccl {
namespace {

using Offer = std::vector<std::string>;

NetCandidate candidate(const char* name, bool available, bool by_default, const char* detail = "") {
  return {name, {available, by_default, detail}};
}

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NetPolicy, ParsesListsAndExclusions) {
  EXPECT_FALSE(parse_net_policy("").is_list());
  EXPECT_TRUE(parse_net_policy("").excluded.empty());
  EXPECT_EQ(parse_net_policy("tcp").named, Offer{"tcp"});
  EXPECT_EQ(parse_net_policy("UCX, tcp").named, (Offer{"ucx", "tcp"}));
  NetPolicy not_ib = parse_net_policy("^ib");
  EXPECT_FALSE(not_ib.is_list());
  EXPECT_EQ(not_ib.excluded, Offer{"ib"});
  EXPECT_EQ(parse_net_policy("^ib,ucx").excluded, (Offer{"ib", "ucx"}));
}

TEST(NetPolicy, RefusesWhatIsNotATransportList) {
  EXPECT_NE(error_of([] { parse_net_policy("gm"); }).find("'gm' is not a network transport"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_net_policy("tcp,,ucx"); }).find("empty item"), std::string::npos);
  EXPECT_NE(error_of([] { parse_net_policy("tcp,tcp"); }).find("named twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_net_policy("^ib,ucx,tcp"); }).find("excludes every"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_net_policy("^"); }).find("CCL_NET"), std::string::npos);
}

TEST(NetOffer, DefaultTakesWhatRunsInCclsOrderAndUcxOnlyBeyondTcp) {
  std::vector<NetCandidate> all = {candidate("ib", true, true), candidate("ucx", true, false),
                                   candidate("tcp", true, true)};
  EXPECT_EQ(net_offer(parse_net_policy(""), all), (Offer{"ib", "tcp"}));
  all[1].availability.by_default = true;  // UCX with a network of its own (rc, ud, dc)
  EXPECT_EQ(net_offer(parse_net_policy(""), all), (Offer{"ib", "ucx", "tcp"}));
  all[0].availability.available = false;
  EXPECT_EQ(net_offer(parse_net_policy(""), all), (Offer{"ucx", "tcp"}));
  EXPECT_EQ(net_offer(parse_net_policy("^ucx"), all), Offer{"tcp"});
}

TEST(NetOffer, AListIsTakenInItsOrderAndEachMustRun) {
  std::vector<NetCandidate> all = {candidate("ib", false, false, "no RDMA device"),
                                   candidate("ucx", true, false), candidate("tcp", true, true)};
  EXPECT_EQ(net_offer(parse_net_policy("tcp,ucx"), all), (Offer{"tcp", "ucx"}));
  EXPECT_EQ(net_offer(parse_net_policy("ucx"), all), Offer{"ucx"});  // by_default does not matter
  std::string why = error_of([&] { net_offer(parse_net_policy("ib,tcp"), all); });
  EXPECT_NE(why.find("CCL_NET asks for ib, which cannot run here: no RDMA device"),
            std::string::npos)
      << why;
  std::vector<NetCandidate> without_ucx = {candidate("tcp", true, true)};
  why = error_of([&] { net_offer(parse_net_policy("ucx"), without_ucx); });
  EXPECT_NE(why.find("this build of ccl does not have"), std::string::npos) << why;
  std::vector<NetCandidate> nothing = {candidate("tcp", false, false, "no interface is up")};
  why = error_of([&] { net_offer(parse_net_policy(""), nothing); });
  EXPECT_NE(why.find("tcp: no interface is up"), std::string::npos) << why;
}

TEST(PairTransport, TheLowerRanksPreferenceThatBothOffer) {
  EXPECT_EQ(pair_transport(Offer{"ib", "tcp"}, Offer{"ib", "tcp"}), "ib");
  EXPECT_EQ(pair_transport(Offer{"ib", "tcp"}, Offer{"tcp"}), "tcp");  // one host without a HCA
  EXPECT_EQ(pair_transport(Offer{"tcp", "ucx"}, Offer{"ucx", "tcp"}), "tcp");
  EXPECT_EQ(pair_transport(Offer{"ucx"}, Offer{"tcp"}), "");
}

TEST(PairTransport, OffersRoundTripAsText) {
  EXPECT_EQ(encode_offer(Offer{"ucx", "tcp"}), "ucx,tcp");
  EXPECT_EQ(decode_offer("ucx,tcp"), (Offer{"ucx", "tcp"}));
  EXPECT_TRUE(decode_offer("").empty());
}

// Ranks as threads of this process with shared memory off, so their pairs need a network
// transport. Returns each rank's init result and last error text, and destroys what was made.
struct InitOutcome {
  cclResult_t result = cclSuccess;
  std::string error;
  std::vector<std::string> transports;  // per peer, when init succeeded
};

std::vector<InitOutcome> init_without_shm(int nranks, const char* net) {
  setenv("CCL_SHM_DISABLE", "1", 1);
  setenv("CCL_NET", net, 1);
  setenv("CCL_TIMEOUT", "20", 1);
  cclUniqueId id;
  std::vector<InitOutcome> out(nranks);
  if (cclGetUniqueId(&id) != cclSuccess) {
    out[0].result = cclSystemError;
    return out;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      cclComm_t comm = nullptr;
      out[r].result = cclCommInitRank(&comm, nranks, id, r);
      out[r].error = cclGetLastError(comm);
      if (out[r].result != cclSuccess) return;
      for (int p = 0; p < nranks; ++p) {
        const char* name = nullptr;
        if (cclCommPeerTransport(comm, p, &name) == cclSuccess) out[r].transports.push_back(name);
      }
      float x = 1.0f;
      if (cclAllReduce(&x, &x, 1, cclFloat32, cclSum, comm, nullptr) != cclSuccess ||
          x != static_cast<float>(nranks)) {
        out[r].result = cclInternalError;
        out[r].error = "allreduce over the chosen transport gave a wrong sum";
      }
      cclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  unsetenv("CCL_SHM_DISABLE");
  unsetenv("CCL_NET");
  unsetenv("CCL_TIMEOUT");
  return out;
}

TEST(TransportChoice, TcpByDefaultBetweenRanksWithoutSharedMemory) {
  std::vector<InitOutcome> out = init_without_shm(3, "");
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(out[r].result, cclSuccess) << "rank " << r << ": " << out[r].error;
    for (int p = 0; p < 3; ++p) EXPECT_EQ(out[r].transports[p], p == r ? "self" : "tcp");
  }
}

TEST(TransportChoice, ARequestedTransportThatCannotRunFailsInitSayingWhy) {
  // This machine has no RDMA device: whether or not this build has the ib transport, asking for
  // it fails every rank's init with the reason, and nothing hangs.
  std::vector<InitOutcome> out = init_without_shm(2, "ib");
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(out[r].result, cclSuccess) << "rank " << r;
    EXPECT_NE(out[r].error.find("CCL_NET asks for ib"), std::string::npos)
        << "rank " << r << ": " << out[r].error;
  }
}

TEST(TransportChoice, UcxWhenAskedFor) {
  if (transport::find_network_transport("ucx") == nullptr) GTEST_SKIP() << "built without UCX";
  std::vector<InitOutcome> out = init_without_shm(2, "ucx");
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(out[r].result, cclSuccess) << "rank " << r << ": " << out[r].error;
    EXPECT_EQ(out[r].transports[1 - r], "ucx");
  }
}

TEST(TransportChoice, ABadCclNetFailsInitNamingIt) {
  std::vector<InitOutcome> out = init_without_shm(2, "tcp,infiniband");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].result, cclInvalidUsage) << "rank " << r;
    EXPECT_NE(out[r].error.find("'infiniband' is not a network transport"), std::string::npos)
        << out[r].error;
  }
}

}  // namespace
}  // namespace ccl
