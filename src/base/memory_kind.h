// The kinds of memory a call's buffer can be (docs/design-notes.md "Memory kinds and
// registration"). Below everything: the transports say which kinds they move (Transport::moves),
// the algorithms keep one kernel row per kind (algorithms/memory_kernels.h), the communicator
// resolves each call's kinds once.
#pragma once

#include <cstdint>

namespace ccl {

enum class MemoryKind : uint8_t {
  Host,            // malloc'd, stack, anything the process addresses
  RegisteredHost,  // from cclMemAlloc: a memfd the host's other ranks can map
  CudaDevice,      // reserved for the CUDA path (no kernel row yet)
};
inline constexpr int kNumMemoryKinds = 3;

// "host", "registered host", "cuda device".
constexpr const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host:
      return "host";
    case MemoryKind::RegisteredHost:
      return "registered host";
    case MemoryKind::CudaDevice:
      return "cuda device";
  }
  return "?";
}

constexpr bool is_host_memory(MemoryKind kind) {
  return kind == MemoryKind::Host || kind == MemoryKind::RegisteredHost;
}

}  // namespace ccl
