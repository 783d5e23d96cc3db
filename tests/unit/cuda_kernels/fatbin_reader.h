// A reader of the fatbin container nvcc --fatbin writes, and of the parts of the CUDA ELF and
// PTX images in it that the tests check (which architectures, which kernels). Written from the
// layout as observed in the files CUDA 13.0 produces (see fatbin_reader.cc for the fields):
// a test aid, not a loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace ccl::test::fatbin {

inline constexpr uint32_t kMagic = 0xBA55ED50;
inline constexpr uint16_t kKindPtx = 1;
inline constexpr uint16_t kKindElf = 2;

struct Entry {
  uint16_t kind = 0;         // kKindPtx or kKindElf
  uint32_t header_size = 0;  // of this entry's header
  uint64_t payload_size = 0;
  uint64_t payload_offset = 0;   // from the start of the fatbin
  uint32_t compressed_size = 0;  // 0 when stored uncompressed
  uint16_t version_major = 0;    // of the payload's format (PTX ISA 9.0, CUDA ELF 1.8)
  uint16_t version_minor = 0;
  uint32_t arch = 0;   // 80 for sm_80 / compute_80, ...
  uint64_t flags = 0;  // bit 0: 64-bit code; kFlagCompressed: the payload is compressed
};

inline constexpr uint64_t kFlagCompressed = 0x8000;

struct Container {
  uint16_t version = 0;
  uint16_t header_size = 0;
  uint64_t fat_size = 0;  // bytes of entries after the header
  std::vector<Entry> entries;
};

// Parses the container at data[0, size); on a malformed one returns false with *error set.
bool parse(const unsigned char* data, size_t size, Container* out, std::string* error);

// An ELF image's CUDA facts: its machine (190 = EM_CUDA), the SM it was built for and the names
// of its global function symbols (the kernels).
struct ElfInfo {
  uint16_t machine = 0;
  uint32_t sm = 0;
  std::set<std::string> global_functions;
};
bool parse_elf(const unsigned char* data, size_t size, ElfInfo* out, std::string* error);

// A PTX image's `.target` (e.g. "sm_90") and the names of its `.entry` functions.
struct PtxInfo {
  std::string target;
  std::set<std::string> entries;
};
PtxInfo parse_ptx(const unsigned char* data, size_t size);

}  // namespace ccl::test::fatbin
