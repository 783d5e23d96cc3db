// SIGUSR1 dumps every live flight recorder of the process to the log: `kill -USR1 <pid>` on a hung
// job shows what each rank is doing and whom it waits for.
//
// The first registration installs a SIGUSR1 handler (unless the application has its own: then
// the dump is off and the log says so at INFO) and starts a dumper thread. The handler only
// writes a byte to a pipe; the thread reads it and dumps, so no unsafe work runs in the handler.
#pragma once

namespace ccl {

class FlightRecorder;

// A disabled recorder (capacity 0) is not registered and installs nothing. Registering twice is
// harmless.
void register_recorder(FlightRecorder* recorder);
// When this returns, no dump of the recorder runs or will run: it may be destroyed. Unknown
// recorders are ignored. ~FlightRecorder calls it, so owners need not.
void unregister_recorder(FlightRecorder* recorder);
// Whether this process's SIGUSR1 dump is active (handler installed and dumper thread running).
bool signal_dump_active();

}  // namespace ccl
