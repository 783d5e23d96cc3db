// The layouts read here, as found in CUDA 13.0's output (all fields little-endian):
//
// Container header, 16 bytes: u32 magic 0xBA55ED50 | u16 version (1) | u16 header size (16) |
// u64 size of the entries that follow.
// Entry header (header_size bytes, 64 for ELF and 80 or 88 for PTX; the fields up to byte 48
// are common): u16 kind (1 PTX, 2 ELF) | u16 (0x0101) | u32 header size | u64 payload size |
// u32 compressed size (0 when stored) | u32 | u16 minor | u16 major version of the payload's
// format | u32 arch (80, 90) | u32 name offset | u32 name length | u64 flags (0x1: 64-bit,
// 0x10: Linux, 0x8000: compressed) | ... The payload follows its header, and the next entry
// follows the payload.
// CUDA ELF (ELF64, e_machine 190 = EM_CUDA, OS ABI 0x41): the SM is bits 8-15 of e_flags in the
// ELF ABI version 8 that CUDA 12 and 13 write.
#include "fatbin_reader.h"

#include <cstring>

namespace ccl::test::fatbin {
namespace {

template <class T>
bool read(const unsigned char* data, size_t size, uint64_t offset, T* out) {
  if (offset > size || size - offset < sizeof(T)) return false;
  std::memcpy(out, data + offset, sizeof(T));
  return true;
}

bool fail(std::string* error, const std::string& what) {
  *error = what;
  return false;
}

}  // namespace

bool parse(const unsigned char* data, size_t size, Container* out, std::string* error) {
  uint32_t magic = 0;
  if (!read(data, size, 0, &magic) || magic != kMagic) return fail(error, "no fatbin magic");
  if (!read(data, size, 4, &out->version) || !read(data, size, 6, &out->header_size) ||
      !read(data, size, 8, &out->fat_size)) {
    return fail(error, "truncated container header");
  }
  if (out->header_size < 16 || out->fat_size > size - out->header_size) {
    return fail(error, "container sizes outside the data");
  }
  const uint64_t end = uint64_t(out->header_size) + out->fat_size;
  uint64_t at = out->header_size;
  while (at < end) {
    Entry e;
    const bool ok = read(data, size, at, &e.kind) && read(data, size, at + 4, &e.header_size) &&
                    read(data, size, at + 8, &e.payload_size) &&
                    read(data, size, at + 16, &e.compressed_size) &&
                    read(data, size, at + 24, &e.version_minor) &&
                    read(data, size, at + 26, &e.version_major) &&
                    read(data, size, at + 28, &e.arch) && read(data, size, at + 40, &e.flags);
    if (!ok || e.header_size < 48) {
      return fail(error, "truncated entry header at " + std::to_string(at));
    }
    e.payload_offset = at + e.header_size;
    if (e.payload_offset > end || e.payload_size > end - e.payload_offset) {
      return fail(error, "entry at " + std::to_string(at) + " runs past the container");
    }
    out->entries.push_back(e);
    at = e.payload_offset + e.payload_size;
  }
  return true;
}

bool parse_elf(const unsigned char* data, size_t size, ElfInfo* out, std::string* error) {
  static const unsigned char kIdent[] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* LE */};
  if (size < 64 || std::memcmp(data, kIdent, sizeof kIdent) != 0) {
    return fail(error, "not a little-endian ELF64 image");
  }
  uint32_t flags = 0;
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  read(data, size, 18, &out->machine);
  read(data, size, 40, &shoff);
  read(data, size, 48, &flags);
  read(data, size, 58, &shentsize);
  read(data, size, 60, &shnum);
  out->sm = (flags >> 8) & 0xff;
  if (shentsize < 64) return fail(error, "ELF section headers too small");
  // Every symbol table's global functions, their names read from the table's linked strings.
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint64_t sh = shoff + uint64_t(i) * shentsize;
    uint32_t type = 0, link = 0;
    uint64_t offset = 0, bytes = 0, entsize = 0;
    if (!read(data, size, sh + 4, &type) || !read(data, size, sh + 24, &offset) ||
        !read(data, size, sh + 32, &bytes) || !read(data, size, sh + 40, &link) ||
        !read(data, size, sh + 56, &entsize)) {
      return fail(error, "ELF section header outside the image");
    }
    if (type != 2 /* SHT_SYMTAB */) continue;
    uint64_t str_offset = 0, str_bytes = 0;
    const uint64_t str_sh = shoff + uint64_t(link) * shentsize;
    if (!read(data, size, str_sh + 24, &str_offset) || !read(data, size, str_sh + 32, &str_bytes) ||
        str_offset > size || str_bytes > size - str_offset || entsize < 24) {
      return fail(error, "ELF string table outside the image");
    }
    for (uint64_t s = 0; s + entsize <= bytes; s += entsize) {
      uint32_t name = 0;
      uint8_t info = 0;
      if (!read(data, size, offset + s, &name) || !read(data, size, offset + s + 4, &info)) {
        return fail(error, "ELF symbol outside the image");
      }
      const bool func = (info & 0xf) == 2, global = (info >> 4) == 1;
      if (!func || !global || name >= str_bytes) continue;
      const char* p = reinterpret_cast<const char*>(data + str_offset + name);
      out->global_functions.insert(std::string(p, strnlen(p, str_bytes - name)));
    }
  }
  return true;
}

PtxInfo parse_ptx(const unsigned char* data, size_t size) {
  PtxInfo info;
  const std::string text(reinterpret_cast<const char*>(data),
                         strnlen(reinterpret_cast<const char*>(data), size));
  size_t line_start = 0;
  while (line_start < text.size()) {
    size_t line_end = text.find('\n', line_start);
    if (line_end == std::string::npos) line_end = text.size();
    const std::string line = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (line.rfind(".target ", 0) == 0) {
      info.target = line.substr(8, line.find_first_of(", \t\r", 8) - 8);
    }
    const size_t entry = line.find(".entry ");
    if (entry != std::string::npos) {
      const size_t name = entry + 7;
      info.entries.insert(line.substr(name, line.find_first_of("( \t\r", name) - name));
    }
  }
  return info;
}

}  // namespace ccl::test::fatbin
