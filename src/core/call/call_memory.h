// A call's buffers as the communicator sees them (docs/design-notes.md "Memory kinds and
// registration"): resolved once per call, before anything is sent — each buffer's registration (the
// registration cache's, or none), hence its kind, the kernel row that serves both kinds, and a
// check that every transport of the communicator moves them.
//
// A buffer is resolved by its first byte: it lies in one allocation, so the registration that
// holds its first byte is its registration. A transport that uses a request's registration
// checks that it covers the bytes it moves (RegisteredRegion::covers).
#pragma once

#include <span>
#include <vector>

#include "algorithms/memory_kernels.h"
#include "core/registration/registration_cache.h"
#include "transport/registered_region.h"
#include "transport/transport.h"

namespace ccl {

struct CallMemory {
  const transport::RegisteredRegion* input = nullptr;  // the sendbuff's registration
  const transport::RegisteredRegion* output = nullptr;
  MemoryKind input_kind = MemoryKind::Host;
  MemoryKind output_kind = MemoryKind::Host;
  const algo::MemoryKernels* kernels = nullptr;  // the row that reaches both kinds
};

// Throws InvalidArgument, naming `what` and the buffer, when no kernel row reaches both kinds or
// a transport in `transports` cannot move one of them.
CallMemory resolve_call_memory(RegistrationCache& cache,
                               std::span<transport::Transport* const> transports, const char* what,
                               const void* input, const void* output);

}  // namespace ccl
