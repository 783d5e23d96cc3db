// Writes a whole file so that a reader never sees a part of it: the text goes to a temporary file
// in the same folder, which is then renamed over the path. For files that others read while they
// change: the metrics file (node_exporter's textfile collector reads it at any time), ccl-check's
// --prometheus file, the tuner cache (ranks of other jobs read it).
#pragma once

#include <string>
#include <string_view>

namespace ccl {

// "" once `path` holds `text`; else why not ("cannot create|write|replace <file>: <reason>"), and
// no temporary file is left. The temporary file is PATH.<pid>-<n>.tmp: the process's id and a
// number of its own per call, so that threads of one process (ranks as threads) writing the same
// path never share it. Needs nothing else of ccl (ccl-check compiles it in).
std::string replace_file(const std::string& path, std::string_view text);

}  // namespace ccl
