#include "core/diagnostics/signal_dump.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "base/log.h"
#include "core/diagnostics/flight_recorder.h"

namespace ccl {

namespace {

constexpr char kDumpByte = 'd';
constexpr char kQuitByte = 'q';

// The write end of the wake-up pipe, read by the handler: an atomic int is async-signal-safe.
// With the pid of the process that owns the pipe: a forked child that has not set up its own
// would otherwise wake its parent's dumper.
std::atomic<int> g_wake_fd{-1};
std::atomic<pid_t> g_wake_pid{0};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<pid_t>::is_always_lock_free);

void on_sigusr1(int) {
  const int saved_errno = errno;
  const int fd = g_wake_fd.load(std::memory_order_relaxed);
  if (fd >= 0 && g_wake_pid.load(std::memory_order_relaxed) == getpid()) {
    // Non-blocking: with the pipe full a dump is already due, the byte is not needed.
    ssize_t n = write(fd, &kDumpByte, 1);
    (void)n;
  }
  errno = saved_errno;
}

struct Registry {
  std::mutex mu;
  std::vector<FlightRecorder*> recorders;
  pid_t owner = 0;  // the process that set up what follows; 0: nobody yet
  bool active = false;
  bool shut_down = false;  // the process is exiting: start no thread any more
  int read_fd = -1, write_fd = -1;
  std::thread* dumper = nullptr;
  std::vector<std::thread*> orphans;  // threads of a parent process, kept reachable after fork
  std::atomic<bool> dumper_exited{false};
};

// Never destroyed: recorders owned by static objects may unregister during exit, after any
// destructor of this file ran. Reachable from this static, so LSan does not count it as a leak.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// Waits for bytes on the pipe. A service thread: its wait ends with the quit byte at exit.
void dumper_loop(Registry* reg, int read_fd) {
  for (;;) {
    pollfd p{read_fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    char buf[64];
    const ssize_t n = read(read_fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    if (memchr(buf, kDumpByte, n) != nullptr) {
      // Under the registry mutex: unregister_recorder waits for the dump of its recorder to end.
      std::lock_guard<std::mutex> lock(reg->mu);
      for (const FlightRecorder* r : reg->recorders) r->dump("SIGUSR1", /*force=*/true);
    }
    if (memchr(buf, kQuitByte, n) != nullptr) break;
  }
  reg->dumper_exited.store(true);
}

// A fork while another thread holds the mutex would leave the child's copy locked forever.
void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { registry().mu.lock(); }, [] { registry().mu.unlock(); },
                   [] { registry().mu.unlock(); });
  });
}

// First registration in this process (also in a forked child, which has no dumper thread and
// whose inherited recorders belong to its parent). reg.mu held.
void set_up(Registry& reg) {
  if (reg.owner != 0) {
    // A forked child: the parent's thread does not exist here and its pipe is the parent's.
    g_wake_fd.store(-1);
    if (reg.read_fd >= 0) close(reg.read_fd);
    if (reg.write_fd >= 0) close(reg.write_fd);
    reg.read_fd = reg.write_fd = -1;
    // The parent's std::thread: not joinable here, never destroyed (that would terminate).
    if (reg.dumper != nullptr) reg.orphans.push_back(reg.dumper);
    reg.dumper = nullptr;
    reg.recorders.clear();
    reg.active = false;
  }
  reg.owner = getpid();
  if (reg.shut_down) return;

  struct sigaction old {};
  sigaction(SIGUSR1, nullptr, &old);
  const bool siginfo = (old.sa_flags & SA_SIGINFO) != 0;
  const bool ours = !siginfo && old.sa_handler == on_sigusr1;  // inherited through fork
  if (!ours && (siginfo || old.sa_handler != SIG_DFL)) {
    CCL_INFO(kInit,
             "flight recorder: SIGUSR1 has a handler of the application; the SIGUSR1 dump "
             "is off (dumps on errors and timeouts still happen)");
    return;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    CCL_WARN(kInit, "flight recorder: pipe2 failed (%s); the SIGUSR1 dump is off", strerror(errno));
    return;
  }
  // The thread blocks every signal, so that the application's signals go to its own threads.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  try {
    reg.dumper_exited.store(false);
    reg.dumper = new std::thread(dumper_loop, &reg, fds[0]);
  } catch (const std::exception& e) {
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    close(fds[0]);
    close(fds[1]);
    CCL_WARN(kInit, "flight recorder: no dumper thread (%s); the SIGUSR1 dump is off", e.what());
    return;
  }
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  reg.read_fd = fds[0];
  reg.write_fd = fds[1];
  g_wake_pid.store(getpid());
  g_wake_fd.store(fds[1]);
  install_fork_handlers();
  if (!ours) {
    struct sigaction sa {};
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  }
  reg.active = true;
  CCL_INFO(kInit, "flight recorder: kill -USR1 %d dumps the recent operations to the log",
           static_cast<int>(getpid()));
}

// Stops the dumper thread at exit, so that it neither outlives the process's statics nor shows
// up as a leak. The wait is bounded: a dump stuck writing to a blocked stderr is abandoned.
struct DumperStopper {
  ~DumperStopper() {
    Registry& reg = registry();
    std::thread* t = nullptr;
    {
      // Bounded: a dump stuck on stderr keeps the mutex; the thread is then left to the exit.
      // (try_lock rather than a timed lock: TSan does not follow pthread_mutex_timedlock.)
      std::unique_lock<std::mutex> lock(reg.mu, std::defer_lock);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (!lock.try_lock()) {
        if (std::chrono::steady_clock::now() > give_up) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      reg.shut_down = true;
      if (reg.dumper == nullptr || reg.owner != getpid()) return;
      t = reg.dumper;
      reg.dumper = nullptr;
      reg.active = false;
      // The handler keeps the fds: closing them could let it write into a reused descriptor.
      ssize_t n = write(reg.write_fd, &kQuitByte, 1);
      (void)n;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!reg.dumper_exited.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (reg.dumper_exited.load())
      t->join();
    else
      t->detach();
    delete t;
  }
};
DumperStopper g_stopper;

}  // namespace

void register_recorder(FlightRecorder* recorder) {
  if (recorder == nullptr || !recorder->enabled()) return;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  if (reg.owner != getpid()) set_up(reg);
  if (!reg.active) return;
  if (std::find(reg.recorders.begin(), reg.recorders.end(), recorder) == reg.recorders.end())
    reg.recorders.push_back(recorder);
}

void unregister_recorder(FlightRecorder* recorder) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  std::erase(reg.recorders, recorder);
}

bool signal_dump_active() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.active && reg.owner == getpid();
}

}  // namespace ccl
