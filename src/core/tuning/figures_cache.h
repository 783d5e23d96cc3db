// Probed link figures kept per machine (CCL_TUNER_CACHE), so that every launch of the same job
// makes the same choices.
//
// Why. The probe at init (core/comm/tuner_setup.cc) times real operations, and on a noisy
// machine its figures move 10-25% from one launch to the next (measured on the 2-core VM,
// 2 ranks, five launches: shm beta 11.2-14.9 GB/s, direct beta 19.7-22.6 GB/s). Where two
// algorithms are predicted within a few percent of each other (2 ranks, 1 MiB allreduce:
// direct/Simple 105.5 us against ring/LL 108.3 us in one launch, 116.0 against 112.9 in the
// next), that noise alone moved the choice between launches. Now the first launch of a shape on
// a machine probes and writes rank 0's figures here; every later launch reads them, skips the
// probe and chooses exactly as the first did. A different shape, transport or ccl version is
// another entry (the key below); deleting the directory, or CCL_TUNER_CACHE=none, probes anew.
//
// An entry is a figures file (tuner.h, format_figures) named by a 64-bit FNV-1a hash of its
// key, with the key itself in a comment on its first line, checked on reading (a colliding or
// foreign file is a miss). Files are written to a temporary name and renamed into place, so
// that ranks of concurrent jobs never read half a file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/tuning/cost_model.h"

namespace ccl::tune {

// The directory CCL_TUNER_CACHE names; unset or empty: $XDG_CACHE_HOME/ccl, else
// $HOME/.cache/ccl; "none" (or neither variable set): "" (no cache).
std::string figures_cache_dir();

// What the probe's figures depend on: the machine (`host`: rank 0's host name), the shape the
// probe ran on, the transports rank 0 reached its peers by (sorted, without repeats) and ccl's
// version. One line of text.
std::string figures_cache_key(const std::string& host, const Shape& shape,
                              std::vector<std::string> transports);

// The entry's path for `key` under `dir`.
std::string figures_cache_path(const std::string& dir, const std::string& key);

// The figures of the entry at `path` if it exists, is for `key` and reads as a figures file;
// nullopt otherwise (an unreadable or malformed entry is logged at WARN and ignored).
std::optional<Figures> read_cached_figures(const std::string& path, const std::string& key);

// Writes the entry (creating `path`'s directory). False, logged at WARN, where it cannot.
bool write_cached_figures(const std::string& path, const std::string& key, const Figures& figures);

}  // namespace ccl::tune
