// The one thread of a process that watches its device worlds' programs in flight
// (device_world.h): every 2 ms while any is in flight, asleep otherwise. It reads the words the
// streams write at the end of each program and the flag pages (host memory) and makes no driver
// call, so it never waits for a stream; it only fails a world whose program is late, whose
// communicator was aborted, or whose page another rank released.
#pragma once

namespace ccl {

class DeviceWorld;

class DeviceWatchdog {
 public:
  static void add(DeviceWorld* world);
  // Returns once the watchdog no longer looks at `world`.
  static void remove(DeviceWorld* world);
  // A program was queued: look again soon.
  static void wake();
};

}  // namespace ccl
