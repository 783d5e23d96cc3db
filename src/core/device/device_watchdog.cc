#include "core/device/device_watchdog.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "core/device/device_world.h"

namespace ccl {

namespace {

// How often the watchdog looks while programs are in flight: a late program is failed within
// this much of its deadline.
constexpr auto kInterval = std::chrono::milliseconds(2);

struct Watch {
  std::mutex mutex;  // held while the worlds are looked at: remove() waits for that
  std::condition_variable wake;
  std::set<DeviceWorld*> worlds;
  bool busy = false;     // some world had programs in flight at the last look
  pid_t started_in = 0;  // the process whose thread runs loop(): a forked child starts its own

  void loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      if (busy) {
        wake.wait_for(lock, kInterval);
      } else {
        wake.wait(lock);
      }
      const auto now = Clock::now();
      busy = false;
      for (DeviceWorld* world : worlds) busy = world->check(now) || busy;
    }
  }
};

// Never destroyed: the thread runs (asleep when there is nothing to watch) for the process's
// life, as the worlds it watches may outlive static destructors.
Watch& watch() {
  static Watch* w = new Watch();
  return *w;
}

}  // namespace

void DeviceWatchdog::add(DeviceWorld* world) {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  if (w.started_in != getpid()) {
    // The first world of this process (a forked child has none of its parent's thread, nor may it
    // look at its parent's worlds).
    w.worlds.clear();
    w.busy = false;
    w.started_in = getpid();
    std::thread([&w] { w.loop(); }).detach();
  }
  w.worlds.insert(world);
}

void DeviceWatchdog::remove(DeviceWorld* world) {
  Watch& w = watch();
  std::lock_guard lock(w.mutex);
  w.worlds.erase(world);
}

void DeviceWatchdog::wake() {
  Watch& w = watch();
  {
    std::lock_guard lock(w.mutex);
    if (w.busy) return;  // it looks again within the interval anyway
    w.busy = true;
  }
  w.wake.notify_one();
}

}  // namespace ccl
