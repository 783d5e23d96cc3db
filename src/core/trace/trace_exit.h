// Traces of communicators still alive when the process exits (the application never destroyed
// them, as torch programs often do not) are written then: the first registration installs an
// std::atexit handler that writes every registered recorder's file.
#pragma once

namespace ccl::trace {

class TraceRecorder;

void write_at_exit(TraceRecorder* recorder);
// When this returns, the exit handler does not use the recorder (it waits for one running).
void forget_at_exit(TraceRecorder* recorder);

}  // namespace ccl::trace
