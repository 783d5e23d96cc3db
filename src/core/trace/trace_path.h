// The file each rank's trace goes to (CCL_TRACE_FILE): ranks and communicators never overwrite
// each other's. The rule:
//   1. In the pattern, %h is the host name (up to its first '.'), %p the pid, %r the rank in the
//      communicator, %% a '%'.
//   2. A pattern without %r gets ".<rank>" before the extension of its last component:
//      trace.json -> trace.0.json, trace -> trace.0, /tmp/run.d/trace -> /tmp/run.d/trace.0.
//   3. The process's first communicator (the first to finish connecting; with ranks as threads
//      of one process, every rank of it) uses that path. Every other one adds ".<name>-<tag>"
//      before the extension (".<tag>" without a name): its cclConfig_t.commName, characters
//      other than [A-Za-z0-9_-] made '_', and the 12 hex digits that its rank 0 drew at init
//      and all its members share (they name its shared-memory segments too), e.g.
//      trace.0.tp-5f3a9c01b2d4.json. So a split never collides with the first communicator,
//      in this process or another, and all members of one communicator carry the same tag.
//   4. A path still taken by an earlier communicator of this process gets ".c<N>" before the
//      extension, N = 1, 2, ... the first free.
#pragma once

#include <string>
#include <string_view>

namespace ccl::trace {

// Rule 1, and rule 2 when the pattern has no %r; `tags` (rules 3 and 4: "tp-5f3a9c01b2d4",
// "tp-5f3a9c01b2d4.c1", or "" for none) follow the rank: trace.0.tp-5f3a9c01b2d4.json.
std::string expand_trace_pattern(std::string_view pattern, std::string_view host, long pid,
                                 int rank, std::string_view tags = "");
// `path` with "." + `tag` before the extension of its last component (the last '.' that is not
// the component's first character); with none, at the end.
std::string insert_before_extension(std::string_view path, std::string_view tag);
// Rule 3's tag: "<name>-<comm_tag>", or "<comm_tag>" for an empty name.
std::string communicator_tag(std::string_view comm_name, std::string_view comm_tag);

// Rules 1 to 4 for a communicator of this process, whose path it claims for the rest of the
// process's life (a later communicator never reuses it). `comm_tag`: Peers::comm_tag().
std::string claim_trace_path(std::string_view pattern, int rank, std::string_view comm_name,
                             std::string_view comm_tag);

// The host name as %h and the traces' "rank R (host H)" give it: up to its first '.'.
std::string short_host_name();

}  // namespace ccl::trace
