#include "core/call/call_memory.h"

#include "base/error.h"

namespace ccl {

namespace {

MemoryKind kind_of(const transport::RegisteredRegion* region) {
  return region != nullptr ? region->kind : MemoryKind::Host;
}

void check_moved(std::span<transport::Transport* const> transports, const char* what,
                 const char* buffer, MemoryKind kind) {
  for (transport::Transport* t : transports) {
    if (!t->moves(kind)) {
      throw_error(cclInvalidArgument, "%s: %s is %s memory, which the %s transport cannot move",
                  what, buffer, memory_kind_name(kind), t->name());
    }
  }
}

}  // namespace

CallMemory resolve_call_memory(RegistrationCache& cache,
                               std::span<transport::Transport* const> transports, const char* what,
                               const void* input, const void* output) {
  CallMemory m;
  m.input = input != nullptr ? cache.find(input, 1) : nullptr;
  m.output = output == input ? m.input : output != nullptr ? cache.find(output, 1) : nullptr;
  m.input_kind = kind_of(m.input);
  m.output_kind = kind_of(m.output);
  check_moved(transports, what, "sendbuff", m.input_kind);
  check_moved(transports, what, "recvbuff", m.output_kind);
  m.kernels = algo::kernels_for(m.input_kind, m.output_kind);
  if (m.kernels == nullptr) {
    throw_error(cclInvalidArgument,
                "%s: no kernels move between %s memory (sendbuff) and %s "
                "memory (recvbuff)",
                what, memory_kind_name(m.input_kind), memory_kind_name(m.output_kind));
  }
  return m;
}

}  // namespace ccl
