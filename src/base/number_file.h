// A file of numbers by name, one "key value" line each: the tuner's figures file (CCL_TUNER_FILE,
// the tuner cache) and ccl-sim's model files. '#' starts a comment; blank lines are skipped.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>

namespace ccl {

/// Reads `path`, whose keys must be among `keys`, each at most once, each with one finite
/// number. `set(k, v)` stores the value of keys[k] and returns nullptr, or why `v` is out of
/// range ("must be > 0"). Throws InvalidArgument "<path>:<line>: key '<key>': <why> in '<line>'"
/// naming the first bad line, or "<what> <path>: cannot open: ..." (`what`: "tuner figures
/// file").
void read_number_file(const std::string& path, const char* what, std::span<const char* const> keys,
                      const std::function<const char*(size_t key, double value)>& set);

}  // namespace ccl
