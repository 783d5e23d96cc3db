// The communicator's registration cache (core/registration/registration_cache.h) over fake transports that
// count what they are asked: one registration per region, shared and refcounted; cclMemAlloc
// memory registered on first use and dropped once freed; and the per-call resolution
// (core/call/call_memory.h) that refuses a kind a transport cannot move.
#include "core/registration/registration_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "base/error.h"
#include "core/call/call_memory.h"
#include "transport/shm/registered_memory.h"

namespace ccl {
namespace {

using transport::RegisteredRegion;

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// A transport that needs registration (as ib will): it adds a key with a fresh rkey and counts.
class CountingTransport final : public transport::Transport {
 public:
  explicit CountingTransport(bool moves_registered = true) : moves_registered_(moves_registered) {}
  const char* name() const override { return "fake"; }
  std::vector<transport::Connection*> connect(const transport::SetupContext&,
                                              std::span<const int>) override {
    return {};
  }
  void wait(std::chrono::microseconds) override {}
  void interrupt() override {}
  void notify_failure(const transport::FailureNotice&) override {}
  void collect_notices(std::vector<std::pair<int, transport::FailureNotice>>&) override {}
  void check_health() override {}
  bool moves(MemoryKind kind) const override {
    return kind == MemoryKind::Host || (moves_registered_ && kind == MemoryKind::RegisteredHost);
  }
  void register_memory(RegisteredRegion& region) override {
    ++registered;
    region.add_key("fake").rkey = static_cast<uint32_t>(registered);
  }
  void deregister_memory(const RegisteredRegion& region) override {
    ++deregistered;
    EXPECT_NE(region.key_of("fake"), nullptr);
  }
  int registered = 0;
  int deregistered = 0;

 private:
  bool moves_registered_;
};

TEST(RegistrationCache, OneRegistrationPerRegionSharedAndRefcounted) {
  CountingTransport t;
  std::vector<std::byte> memory(8 * kPage);
  {
    RegistrationCache cache(0, {&t});
    const RegisteredRegion* a = cache.acquire(memory.data() + 10, 3 * kPage);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->base % kPage, 0u);
    EXPECT_EQ(a->bytes % kPage, 0u);
    EXPECT_TRUE(a->covers(memory.data() + 10, 3 * kPage));
    EXPECT_EQ(a->kind, MemoryKind::Host);
    EXPECT_EQ(a->owner_rank, 0);
    EXPECT_EQ(a->owner_pid, getpid());
    // Inside it: the same registration, no new one.
    EXPECT_EQ(cache.acquire(memory.data() + kPage, 100), a);
    EXPECT_EQ(t.registered, 1);
    // Every call inside finds it; one outside finds none.
    EXPECT_EQ(cache.find(memory.data() + 20, 1), a);
    EXPECT_EQ(cache.find(memory.data() + 7 * kPage, 1), nullptr);
    // Two references: the first release keeps it.
    cache.release(a);
    EXPECT_EQ(cache.find(memory.data() + 20, 1), a);
    EXPECT_EQ(t.deregistered, 0);
    cache.release(a);
    EXPECT_EQ(t.deregistered, 1);
    EXPECT_EQ(cache.find(memory.data() + 20, 1), nullptr);
    EXPECT_EQ(cache.size(), 0u);
    // A stale handle, and one never given out.
    EXPECT_THROW(cache.release(a), Error);
    int other = 0;
    EXPECT_THROW(cache.release(&other), Error);
    // Bad arguments.
    EXPECT_THROW(cache.acquire(nullptr, 10), Error);
    EXPECT_THROW(cache.acquire(memory.data(), 0), Error);
    // What is left at the end is deregistered with the cache.
    cache.acquire(memory.data(), 10);
    EXPECT_EQ(t.registered, 2);
  }
  EXPECT_EQ(t.deregistered, 2);
}

TEST(RegistrationCache, MemAllocMemoryIsRegisteredOnFirstUseAndDroppedOnceFreed) {
  CountingTransport t;
  RegistrationCache cache(1, {&t});
  void* mem = transport::shm::registered_alloc(3 * kPage);
  const RegisteredRegion* r = cache.find(static_cast<std::byte*>(mem) + 100, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kind, MemoryKind::RegisteredHost);
  EXPECT_EQ(r->base, reinterpret_cast<uintptr_t>(mem));
  EXPECT_EQ(r->bytes, 3 * kPage);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(cache.find(mem, 1), r);
  EXPECT_EQ(t.registered, 1);
  EXPECT_EQ(cache.registrations_made(), 1u);
  // cclCommDeregister takes only what cclCommRegister gave.
  EXPECT_THROW(cache.release(r), Error);
  transport::shm::registered_free(mem);
  EXPECT_EQ(cache.find(mem, 1), nullptr);
  // A new allocation, wherever it lands (perhaps at the same address), is a new registration.
  void* again = transport::shm::registered_alloc(3 * kPage);
  const RegisteredRegion* r2 = cache.find(again, 1);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(t.registered, 2);
  EXPECT_EQ(r2->base, reinterpret_cast<uintptr_t>(again));
  transport::shm::registered_free(again);
}

TEST(CallMemory, KindsAreResolvedOnceAndCheckedAgainstTheTransports) {
  CountingTransport moves_all;
  CountingTransport host_only(/*moves_registered=*/false);
  std::vector<std::byte> plain(kPage);
  void* mem = transport::shm::registered_alloc(kPage);
  {
    RegistrationCache cache(0, {&moves_all});
    std::vector<transport::Transport*> transports{&moves_all};
    CallMemory m = resolve_call_memory(cache, transports, "allreduce", plain.data(), mem);
    EXPECT_EQ(m.input, nullptr);
    EXPECT_EQ(m.input_kind, MemoryKind::Host);
    ASSERT_NE(m.output, nullptr);
    EXPECT_EQ(m.output_kind, MemoryKind::RegisteredHost);
    ASSERT_NE(m.kernels, nullptr);
    EXPECT_EQ(m.kernels->kind, MemoryKind::Host);  // the row that reaches both
    m = resolve_call_memory(cache, transports, "allreduce", mem, mem);
    EXPECT_EQ(m.kernels->kind, MemoryKind::RegisteredHost);
    EXPECT_EQ(m.input, m.output);
  }
  {
    RegistrationCache cache(0, {&host_only});
    std::vector<transport::Transport*> transports{&host_only};
    try {
      resolve_call_memory(cache, transports, "broadcast", plain.data(), mem);
      ADD_FAILURE() << "a kind the transport cannot move was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidArgument);
      EXPECT_STREQ(e.what(),
                   "broadcast: recvbuff is registered host memory, which the fake transport "
                   "cannot move");
    }
  }
  transport::shm::registered_free(mem);
}

}  // namespace
}  // namespace ccl
