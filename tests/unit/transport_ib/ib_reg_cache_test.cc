// The registration cache (ib_reg_cache.h) and the transport's register_memory keys: page-aligned
// MRs reused while they cover a buffer, refcounts, eviction of unused entries only, everything
// deregistered at the end; a request that carries the communicator's region needs no MR of its
// own; device memory registered through its dmabuf (GPUDirect RDMA).
#include "transport/ib/ib_reg_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "ib_test_util.h"
#include "transport/registered_region.h"

namespace ccl::transport::ib_test {
namespace {

using ib::IbRegCache;

class IbRegCacheTest : public IbTest {
 protected:
  void SetUp() override {
    IbTest::SetUp();
    const ib::VerbsApi& api = mock_->api();
    int n = 0;
    ibv_device** list = api.get_device_list(&n);
    context_ = api.open_device(list[0]);
    api.free_device_list(list);
    pd_ = api.alloc_pd(context_);
  }
  void TearDown() override {
    mock_->api().dealloc_pd(pd_);
    mock_->api().close_device(context_);
    IbTest::TearDown();
  }
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
};

TEST_F(IbRegCacheTest, HitsRefcountsAndPageAlignment) {
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<std::byte> buf(8 * page);
  {
    IbRegCache cache(mock_->api(), pd_, 4);
    const std::byte* a = buf.data() + 100;
    auto* e1 = cache.acquire(a, 1000, IbRegCache::kRemoteWrite);
    EXPECT_EQ(e1->base % page, 0u);
    EXPECT_EQ(e1->bytes % page, 0u);
    EXPECT_LE(e1->base, reinterpret_cast<uintptr_t>(a));
    EXPECT_GE(e1->base + e1->bytes, reinterpret_cast<uintptr_t>(a) + 1000);
    EXPECT_TRUE(mock_->registered(reinterpret_cast<void*>(e1->base), e1->bytes));
    // Inside the same pages: the same MR, one more reference.
    auto* e2 = cache.acquire(a + 200, 50, 0);
    EXPECT_EQ(e1, e2);
    EXPECT_EQ(e1->references, 2);
    EXPECT_EQ(cache.hits(), 1u);
    EXPECT_EQ(cache.misses(), 1u);
    cache.release(e1);
    cache.release(e2);
    EXPECT_EQ(e1->references, 0);
    // Kept for a later message.
    EXPECT_EQ(cache.acquire(a, 8, 0), e1);
    cache.release(e1);
    // Beyond the pages: a new one.
    auto* far = cache.acquire(buf.data() + 4 * page, page, 0);
    EXPECT_NE(far, e1);
    EXPECT_EQ(cache.size(), 2u);
    cache.release(far);
    expect_error([&] { cache.release(far); }, cclInternalError, "released twice");
  }
  EXPECT_EQ(mock_->live_mrs(), 0u);  // deregistered with the cache
}

TEST_F(IbRegCacheTest, EvictsOnlyUnusedEntriesLeastRecentlyUsedFirst) {
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<std::byte> buf(16 * page);
  IbRegCache cache(mock_->api(), pd_, 2);
  auto at = [&](int i) { return buf.data() + 2 * i * page + 8; };
  auto* e0 = cache.acquire(at(0), 8, 0);  // held throughout
  auto* e1 = cache.acquire(at(1), 8, 0);
  cache.release(e1);
  auto* e2 = cache.acquire(at(2), 8, 0);  // three entries, bound two: e1 (unused) goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_FALSE(mock_->registered(at(1), 8));
  EXPECT_TRUE(mock_->registered(at(0), 8));
  // All in use: over the bound rather than deregistering memory a message uses.
  auto* e3 = cache.acquire(at(3), 8, 0);
  EXPECT_EQ(cache.size(), 3u);
  cache.release(e2);  // now one can go
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(mock_->registered(at(2), 8));
  cache.release(e3);
  cache.release(e0);
  EXPECT_EQ(mock_->live_mrs(), 2u);
}

// Messages from and into the same unregistered buffers, `rounds` times; the MRs made for them.
uint64_t registrations_for_repeated_messages(MockVerbs& mock, const char* cache_entries) {
  setenv("CCL_IB_REG_CACHE", cache_entries, 1);
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("reuse"));
  unsetenv("CCL_IB_REG_CACHE");
  auto out = make_message(3, 20000);
  TestSink sink(SinkKind::Direct, out.size());
  const uint64_t before = mock.stats().reg_mr;
  for (int round = 0; round < 5; ++round) {
    SendRequest send{out.data(), out.size()};
    RecvRequest recv{out.size(), &sink};
    mesh.conns[0][1]->post_send(&send);
    mesh.conns[1][0]->post_recv(&recv);
    run_ranks(2, [&](int rank) {
      drive(*mesh.transports[rank], {mesh.conns[rank][1 - rank]},
            [&] { return rank == 0 ? send.complete : recv.complete; });
    });
    EXPECT_EQ(first_mismatch(sink.data, 3), -1);
  }
  return mock.stats().reg_mr - before;
}

TEST_F(IbTest, UserBufferRegistrationsLastOnlyAsLongAsTheirMessagesByDefault) {
  // Safe against memory freed and mapped again: one MR for the source, one for the destination,
  // per message.
  EXPECT_EQ(registrations_for_repeated_messages(*mock_, "0"), 10u);
}

TEST_F(IbTest, TransportMessagesReuseRegistrationsWhenTheCacheIsOn) {
  // CCL_IB_REG_CACHE=64: one MR for the source, one for the destination, however many messages.
  EXPECT_EQ(registrations_for_repeated_messages(*mock_, "64"), 2u);
}

TEST_F(IbTest, RegisteredRegionKeysAreUsedWithoutRegistering) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("region"));
  const long page = sysconf(_SC_PAGESIZE);
  const size_t bytes = 3 * page + 123;
  std::vector<std::byte> src_buf(bytes + 2 * page), dst_buf(bytes + 2 * page);
  auto region_for = [&](std::vector<std::byte>& buf, Transport& t) {
    RegisteredRegion r;
    r.id = reinterpret_cast<uintptr_t>(buf.data());
    page_span(buf.data(), buf.size(), &r.base, &r.bytes);
    t.register_memory(r);
    return r;
  };
  RegisteredRegion src = region_for(src_buf, *mesh.transports[0]);
  RegisteredRegion dst = region_for(dst_buf, *mesh.transports[1]);
  ASSERT_NE(src.key_of("ib"), nullptr);
  EXPECT_NE(src.key_of("ib")->lkey, src.key_of("ib")->rkey);
  std::byte* data = src_buf.data() + 77;
  for (size_t i = 0; i < bytes; ++i) data[i] = pattern(9, i);
  // A direct sink into the registered buffer.
  struct IntoBuffer : RecvSink {
    std::byte* at;
    void consume(const std::byte*, size_t, size_t) override { ADD_FAILURE() << "not direct"; }
    std::byte* direct_destination() override { return at; }
  } sink;
  sink.at = dst_buf.data() + 5;
  const uint64_t before = mock_->stats().reg_mr;
  SendRequest send{data, bytes, &src};
  RecvRequest recv{bytes, &sink, &dst};
  mesh.conns[0][1]->post_send(&send);
  mesh.conns[1][0]->post_recv(&recv);
  run_ranks(2, [&](int rank) {
    drive(*mesh.transports[rank], {mesh.conns[rank][1 - rank]},
          [&] { return rank == 0 ? send.complete : recv.complete; });
  });
  EXPECT_EQ(mock_->stats().reg_mr, before);  // no MR made for the message
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(sink.at[i], pattern(9, i)) << i;
  mesh.transports[0]->deregister_memory(src);
  mesh.transports[1]->deregister_memory(dst);
  EXPECT_FALSE(mock_->registered(data, bytes));
}

// GPUDirect RDMA: a region of device memory comes with a dmabuf of its pages (the registration
// cache asks the CUDA driver for it), which the transport registers (ibv_reg_dmabuf_mr) at the
// region's address; the message then moves straight from the region's MR. Without a dmabuf the
// region gets no ib key (it is staged through host memory). The mock provider takes host memory
// for the "device" memory: what is checked is what the transport asks of the provider.
TEST_F(IbTest, DeviceMemoryIsRegisteredThroughItsDmabuf) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("dmabuf"));
  const long page = sysconf(_SC_PAGESIZE);
  const size_t bytes = 2 * page;
  auto pages = [&] {
    return std::unique_ptr<std::byte, decltype(&std::free)>(
        static_cast<std::byte*>(std::aligned_alloc(page, bytes)), &std::free);
  };
  auto device_buf = pages(), dst_buf = pages();
  RegisteredRegion src;
  src.id = 1;
  src.kind = MemoryKind::CudaDevice;
  src.base = reinterpret_cast<uintptr_t>(device_buf.get());
  src.bytes = bytes;
  RegisteredRegion without = src;
  without.id = 2;
  mesh.transports[0]->register_memory(without);
  EXPECT_EQ(without.key_of("ib"), nullptr) << "no dmabuf: no key";
  const int fd = memfd_create("fake-dmabuf", 0);
  ASSERT_GE(fd, 0);
  src.dmabuf_fd = fd;
  const ib::mock::MockStats before = mock_->stats();
  mesh.transports[0]->register_memory(src);
  ::close(fd);  // the MR holds the dmabuf itself
  ASSERT_NE(src.key_of("ib"), nullptr);
  const ib::mock::MockStats after = mock_->stats();
  EXPECT_EQ(after.reg_dmabuf_mr, before.reg_dmabuf_mr + 1);
  EXPECT_EQ(after.last_dmabuf_fd, fd);
  EXPECT_EQ(after.last_dmabuf_offset, 0u);
  EXPECT_EQ(after.last_dmabuf_length, src.bytes);
  EXPECT_EQ(after.last_dmabuf_iova, src.base);

  RegisteredRegion dst;
  dst.id = 3;
  dst.base = reinterpret_cast<uintptr_t>(dst_buf.get());
  dst.bytes = bytes;
  mesh.transports[1]->register_memory(dst);
  auto* data = reinterpret_cast<std::byte*>(src.base);
  for (size_t i = 0; i < bytes; ++i) data[i] = pattern(4, i);
  struct IntoBuffer : RecvSink {
    std::byte* at;
    void consume(const std::byte*, size_t, size_t) override { ADD_FAILURE() << "not direct"; }
    std::byte* direct_destination() override { return at; }
  } sink;
  sink.at = reinterpret_cast<std::byte*>(dst.base);
  const uint64_t mrs = mock_->stats().reg_mr;
  SendRequest send{data, bytes, &src};
  RecvRequest recv{bytes, &sink, &dst};
  mesh.conns[0][1]->post_send(&send);
  mesh.conns[1][0]->post_recv(&recv);
  run_ranks(2, [&](int rank) {
    drive(*mesh.transports[rank], {mesh.conns[rank][1 - rank]},
          [&] { return rank == 0 ? send.complete : recv.complete; });
  });
  EXPECT_EQ(mock_->stats().reg_mr, mrs) << "the message used the dmabuf MR";
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(sink.at[i], pattern(4, i)) << i;
  const uint64_t deregs = mock_->stats().dereg_mr;
  mesh.transports[0]->deregister_memory(src);
  mesh.transports[1]->deregister_memory(dst);
  EXPECT_EQ(mock_->stats().dereg_mr, deregs + 2);
}

}  // namespace
}  // namespace ccl::transport::ib_test
