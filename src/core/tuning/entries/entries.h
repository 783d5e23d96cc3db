// The registry's entry files (registry.h), one function per file: the entries it defines.
#pragma once

#include <span>

#include "core/tuning/registry.h"

namespace ccl::tune::entries {

std::span<const AlgorithmEntry> direct();              // direct.cc: the shared window
std::span<const AlgorithmEntry> ring();                // ring.cc: rings and chains
std::span<const AlgorithmEntry> tree();                // tree.cc: binary trees
std::span<const AlgorithmEntry> recursive_doubling();  // recursive_doubling.cc
std::span<const AlgorithmEntry> rabenseifner();        // rabenseifner.cc
std::span<const AlgorithmEntry> hierarchical();        // hierarchical.cc
std::span<const AlgorithmEntry> pairwise();            // pairwise.cc: alltoall
std::span<const AlgorithmEntry> dissemination();       // dissemination.cc: barrier

// Availability rules several entries share.
inline const char* always(const Shape&, Protocol, size_t) { return nullptr; }
// LL only: the schedule has no chunked form.
inline const char* unchunked(const Shape&, Protocol protocol, size_t) {
  return protocol == Protocol::Simple ? "no chunked form" : nullptr;
}

}  // namespace ccl::tune::entries
