// The executor hands each request the registration of the user buffer it moves (transport.h
// SendRequest::region), nullptr for its own scratch: a fake connection records what it is given.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "algorithms/executor.h"
#include "algorithms/point_to_point.h"
#include "algorithms/ring.h"
#include "transport/registered_region.h"
#include "zero_fill_connection.h"

namespace ccl::algo {
namespace {

using transport::RegisteredRegion;

using RecordingConnection = ZeroFillConnection;

TEST(ExecutorRegions, RequestsCarryTheirBuffersRegistration) {
  RecordingConnection peer(1);
  PeerLinks links;
  links.connection = {nullptr, &peer};
  links.transport = {nullptr, nullptr};
  const AbortFlag abort{false};
  Executor executor(links, WaitPolicy{}, &abort);

  constexpr size_t kCount = 1000;
  std::vector<int32_t> in(kCount, 1), out(2 * kCount, 0);
  RegisteredRegion in_region, out_region;
  ScheduleParams params;
  params.nranks = 2;
  params.rank = 0;
  params.count = kCount;
  const Schedule schedule = ring_allgather(params);
  ExecBuffers buffers{in.data(), out.data(), nullptr, {}};
  buffers.input_region = &in_region;
  buffers.output_region = &out_region;
  ExecOp op;
  op.elem_size = sizeof(int32_t);
  executor.run(schedule, buffers, op, Deadline::after(std::chrono::seconds(10)), {"allgather", 1});

  ASSERT_FALSE(peer.send_regions.empty());
  ASSERT_FALSE(peer.recv_regions.empty());
  for (size_t i = 0; i < peer.send_regions.size(); ++i) {
    const auto* data = peer.send_data[i];
    const bool from_input = data >= reinterpret_cast<const std::byte*>(in.data()) &&
                            data < reinterpret_cast<const std::byte*>(in.data() + kCount);
    EXPECT_EQ(peer.send_regions[i], from_input ? &in_region : &out_region) << "send " << i;
  }
  for (const auto* r : peer.recv_regions) EXPECT_EQ(r, &out_region);

  // Send/recv groups: each operation's slot has its own registration.
  RecordingConnection p2p(1);
  PeerLinks links2;
  links2.connection = {nullptr, &p2p};
  links2.transport = {nullptr, nullptr};
  Executor executor2(links2, WaitPolicy{}, &abort);
  std::vector<std::byte> a(64), b(64);
  const PointToPoint ops[] = {{true, 1, 64}, {false, 1, 64}};
  std::byte* slots[] = {a.data(), b.data()};
  RegisteredRegion ra, rb;
  const RegisteredRegion* slot_regions[] = {&ra, &rb};
  ExecBuffers groups{nullptr, nullptr, nullptr, slots};
  groups.slot_regions = slot_regions;
  ExecOp bytes;
  bytes.elem_size = 1;
  executor2.run(point_to_point(0, ops), groups, bytes, Deadline::after(std::chrono::seconds(10)),
                {"send/recv", 1});
  ASSERT_EQ(p2p.send_regions.size(), 1u);
  EXPECT_EQ(p2p.send_regions[0], &ra);
  ASSERT_EQ(p2p.recv_regions.size(), 1u);
  EXPECT_EQ(p2p.recv_regions[0], &rb);
}

}  // namespace
}  // namespace ccl::algo
