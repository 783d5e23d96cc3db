// The topology's CUDA ids come from ccl's driver table (src/cuda/cuda_devices.h): under the fake
// driver, GPUs found by bus id get the ordinal the driver gives them in this process, whatever
// order hwloc found them in; without a driver none gets one.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "../topology/sample_topologies.h"
#include "cuda/cuda_devices.h"
#include "cuda/cuda_driver.h"
#include "fake_driver.h"
#include "topology/cuda_devices.h"

namespace {

namespace fake = ccl_test::fake_cuda;
using ccl::topo::NodeType;
using ccl::topo::Topology;

class FakeCudaDevices : public testing::Test {
 protected:
  void SetUp() override { fake::install(); }
  void TearDown() override { fake::uninstall(); }
};

// pcie_4gpu() as discovery leaves it before naming: no GPU has a CUDA id yet.
Topology four_unnamed_gpus() {
  Topology topo = ccl::topo::testing::pcie_4gpu();
  for (int gpu : topo.of_type(NodeType::Gpu)) topo.node(gpu).os_index = -1;
  return topo;
}

int cuda_id_of(const Topology& topo, const std::string& name) {
  return topo.node(topo.find(name)).os_index;
}

TEST_F(FakeCudaDevices, BusIdsAreTheDriversByOrdinal) {
  fake::set_devices(3, true);
  EXPECT_EQ(ccl::cuda::device_pci_bus_ids(),
            (std::vector<std::string>{"0000:3B:00.0", "0000:3C:00.0", "0000:3D:00.0"}));
  EXPECT_EQ(
      ccl::topo::cuda_device_ids(),
      (std::map<std::string, int>{{"0000:3b:00.0", 0}, {"0000:3c:00.0", 1}, {"0000:3d:00.0", 2}}));
}

// As under CUDA_VISIBLE_DEVICES=2,0: the process sees two of the four GPUs, in its own order.
TEST_F(FakeCudaDevices, GpusGetTheIdsThisProcessSeesThem) {
  fake::set_bus_ids({"0000:82:00.0", "00000000:03:00.0"});
  Topology topo = four_unnamed_gpus();
  EXPECT_EQ(ccl::topo::name_gpus_by_cuda_id(topo), 2);
  EXPECT_EQ(cuda_id_of(topo, "gpu2"), 0);
  EXPECT_EQ(cuda_id_of(topo, "gpu0"), 1);
  EXPECT_EQ(cuda_id_of(topo, "gpu1"), -1);
  EXPECT_EQ(cuda_id_of(topo, "gpu3"), -1);
}

TEST_F(FakeCudaDevices, ADeviceTheDriverCannotNameMatchesNoGpu) {
  fake::set_bus_ids({"not a bus id", "0000:C2:00.0"});
  EXPECT_EQ(ccl::topo::cuda_device_ids(), (std::map<std::string, int>{{"0000:c2:00.0", 1}}));
  Topology topo = four_unnamed_gpus();
  EXPECT_EQ(ccl::topo::name_gpus_by_cuda_id(topo), 1);
  EXPECT_EQ(cuda_id_of(topo, "gpu3"), 1);
}

TEST(CudaDevicesWithoutADriver, NoGpuGetsAnId) {
  ccl::cuda::set_cuda_driver_for_testing(nullptr);
  EXPECT_TRUE(ccl::cuda::device_pci_bus_ids().empty());
  Topology topo = ccl::topo::testing::pcie_4gpu();  // ids from a file: discovery replaces them
  EXPECT_EQ(ccl::topo::name_gpus_by_cuda_id(topo), 0);
  for (int gpu : topo.of_type(NodeType::Gpu)) EXPECT_EQ(topo.node(gpu).os_index, -1);
}

}  // namespace
