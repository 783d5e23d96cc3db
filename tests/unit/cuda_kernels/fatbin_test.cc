// The embedded fatbin (ccl_cuda_kernels): the container parses, holds SASS for sm_80 and sm_90
// and PTX for compute_90, nothing compressed, and every kernel of cuda_kernel_names.h is a
// global function of each ELF image and an .entry of the PTX. Runs without a GPU.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "algorithms/reduce/cuda/cuda_fatbin.h"
#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "fatbin_reader.h"

namespace ccl::test::fatbin {
namespace {

const unsigned char* image() { return ccl_cuda_fatbin; }
size_t image_size() { return size_t(ccl_cuda_fatbin_size); }

Container parsed() {
  Container c;
  std::string error;
  EXPECT_TRUE(parse(image(), image_size(), &c, &error)) << error;
  return c;
}

const Entry* find(const Container& c, uint16_t kind, uint32_t arch) {
  for (const Entry& e : c.entries) {
    if (e.kind == kind && e.arch == arch) return &e;
  }
  return nullptr;
}

TEST(CudaFatbin, EmbedsTheFileNvccWrote) {
  std::ifstream f(CCL_CUDA_FATBIN_PATH, std::ios::binary);
  ASSERT_TRUE(f) << CCL_CUDA_FATBIN_PATH;
  const std::vector<unsigned char> file{std::istreambuf_iterator<char>(f), {}};
  ASSERT_EQ(file.size(), image_size());
  EXPECT_TRUE(std::equal(file.begin(), file.end(), image()));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(image()) % 8, 0u) << "loaders expect 8-byte alignment";
}

TEST(CudaFatbin, ContainerHeader) {
  const Container c = parsed();
  EXPECT_EQ(c.version, 1);
  EXPECT_EQ(c.header_size, 16);
  EXPECT_EQ(c.header_size + c.fat_size, image_size());
  uint64_t covered = c.header_size;
  for (const Entry& e : c.entries) covered += e.header_size + e.payload_size;
  EXPECT_EQ(covered, image_size()) << "entries tile the container exactly";
}

TEST(CudaFatbin, HoldsSm80AndSm90SassAndCompute90Ptx) {
  const Container c = parsed();
  ASSERT_EQ(c.entries.size(), 3u);
  for (uint32_t sm : {80u, 90u}) {
    const Entry* e = find(c, kKindElf, sm);
    ASSERT_NE(e, nullptr) << "no sm_" << sm << " ELF";
    ElfInfo elf;
    std::string error;
    ASSERT_TRUE(parse_elf(image() + e->payload_offset, e->payload_size, &elf, &error)) << error;
    EXPECT_EQ(elf.machine, 190) << "EM_CUDA";
    EXPECT_EQ(elf.sm, sm);
  }
  const Entry* ptx = find(c, kKindPtx, 90);
  ASSERT_NE(ptx, nullptr) << "no compute_90 PTX";
  EXPECT_EQ(parse_ptx(image() + ptx->payload_offset, ptx->payload_size).target, "sm_90");
  for (const Entry& e : c.entries) {
    EXPECT_EQ(e.flags & 1, 1u) << "64-bit code";
    EXPECT_EQ(e.flags & kFlagCompressed, 0u) << "built with --no-compress";
    EXPECT_EQ(e.compressed_size, 0u);
  }
}

TEST(CudaFatbin, EveryKernelNameInEveryImage) {
  const Container c = parsed();
  for (const Entry& e : c.entries) {
    std::set<std::string> names;
    const unsigned char* payload = image() + e.payload_offset;
    if (e.kind == kKindElf) {
      ElfInfo elf;
      std::string error;
      ASSERT_TRUE(parse_elf(payload, e.payload_size, &elf, &error)) << error;
      names = elf.global_functions;
    } else {
      names = parse_ptx(payload, e.payload_size).entries;
    }
    const std::string where = (e.kind == kKindElf ? "sm_" : "compute_") + std::to_string(e.arch);
    for (int i = 0; i < reduce::cuda::kNumKernels; ++i) {
      const char* name = reduce::cuda::kernel_name_at(i);
      EXPECT_EQ(names.count(name), 1u) << name << " missing from " << where;
    }
    EXPECT_EQ(names.size(), size_t(reduce::cuda::kNumKernels))
        << where << " has kernels cuda_kernel_names.h does not name";
  }
}

TEST(CudaFatbinReader, RejectsWhatIsNotAFatbin) {
  Container c;
  std::string error;
  const unsigned char junk[32] = {0x7f, 'E', 'L', 'F'};
  EXPECT_FALSE(parse(junk, sizeof junk, &c, &error));
  // A valid header whose size claims more than there is.
  std::vector<unsigned char> cut(image(), image() + 64);
  EXPECT_FALSE(parse(cut.data(), cut.size(), &c, &error));
}

}  // namespace
}  // namespace ccl::test::fatbin
