#include "core/diagnostics/metrics_export.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/deadline.h"
#include "base/error.h"
#include "base/log.h"
#include "base/replace_file.h"

namespace ccl::metrics {

MetricsSettings read_metrics_settings() {
  MetricsSettings settings;
  settings.file = config_string("CCL_METRICS_FILE");
  const int64_t interval = config_int("CCL_METRICS_INTERVAL");  // malformed: throws, naming it
  if (interval < 1 || interval > kMaxIntervalSeconds) {
    throw_error(cclInvalidUsage,
                "CCL_METRICS_INTERVAL=%lld must be a whole number of seconds in "
                "[1, %d]",
                static_cast<long long>(interval), kMaxIntervalSeconds);
  }
  settings.interval_s = static_cast<int>(interval);
  return settings;
}

namespace {

constexpr size_t kMaxRetired = 128;  // destroyed communicators' final counts kept per file

struct Live {
  const MetricsExport* owner;
  const CommMetrics* counters;
  std::string comm;  // empty until connected: not shown
  int rank;
  int nranks;
};

}  // namespace

class Exporter;

// One file: the communicators registered with one CCL_METRICS_FILE pattern.
struct File {
  Exporter* exporter;
  std::string path;
  std::chrono::seconds interval;
  Clock::time_point next_due;
  std::vector<Live> live;
  std::deque<Snapshot> retired;
  bool warned = false;     // a failed write was logged
  bool announced = false;  // the first good write was logged
};

namespace {
void exit_handler();
}  // namespace

// The process's exporter: its files and the thread that rewrites them. Never destroyed:
// communicators may be destroyed by static destructors after the exit handler ran.
class Exporter {
 public:
  const pid_t pid = getpid();

  File* add(const MetricsSettings& settings, const std::string& path, int rank, int nranks,
            const MetricsExport* owner, const CommMetrics* counters) {
    std::unique_lock lock(mutex_);
    start_thread();  // first: if it throws, nothing refers to the caller
    std::unique_ptr<File>& slot = files_[settings.file];
    if (!slot) {
      slot = std::make_unique<File>();
      slot->exporter = this;
      slot->path = path;
    }
    File& file = *slot;
    file.interval = std::chrono::seconds(settings.interval_s);
    const Clock::time_point due = Clock::now() + file.interval;
    file.next_due = file.live.empty() ? due : std::min(file.next_due, due);
    file.live.push_back(Live{owner, counters, "", rank, nranks});
    lock.unlock();
    wake_.notify_all();
    return &file;
  }

  void connected(File& file, const MetricsExport* owner, std::string comm) {
    std::lock_guard lock(mutex_);
    for (Live& l : file.live) {
      if (l.owner == owner) l.comm = std::move(comm);
    }
  }

  // The owner's final counts stay in the file (the last kMaxRetired), written now.
  void remove(File& file, const MetricsExport* owner) {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(file.live.begin(), file.live.end(),
                           [&](const Live& l) { return l.owner == owner; });
    if (it == file.live.end()) return;
    const bool shown = !it->comm.empty();
    if (shown) {
      file.retired.push_back(snapshot(*it));
      if (file.retired.size() > kMaxRetired) file.retired.pop_front();
    }
    file.live.erase(it);
    if (shown) write(file);
  }

  void write_now(File& file) {
    std::lock_guard lock(mutex_);
    write(file);
  }

  // Every file that has a communicator alive (the others were written when their last one went).
  void write_all() {
    std::lock_guard lock(mutex_);
    for (auto& [pattern, file] : files_) {
      if (!file->live.empty()) write(*file);
    }
  }

  // At exit: stops and joins the thread, then writes every file with a communicator alive.
  void shutdown() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_ != nullptr && thread_->joinable()) thread_->join();
    write_all();
  }

 private:
  // mutex_ held.
  static Snapshot snapshot(const Live& l) {
    Snapshot s;
    s.comm = l.comm;
    s.rank = l.rank;
    s.nranks = l.nranks;
    l.counters->snapshot_into(s);
    return s;
  }

  // mutex_ held.
  void write(File& file) {
    std::vector<Snapshot> all(file.retired.begin(), file.retired.end());
    for (const Live& l : file.live) {
      if (!l.comm.empty()) all.push_back(snapshot(l));
    }
    const std::string error = replace_file(file.path, render(all));
    if (!error.empty()) {
      if (!file.warned) {
        // The user asked for the file: say so whatever CCL_DEBUG is (once per file).
        log_message(LogLevel::Warn, kColl, "CCL_METRICS_FILE: cannot write the metrics to %s: %s",
                    file.path.c_str(), error.c_str());
      }
      file.warned = true;
    } else if (!file.announced) {
      file.announced = true;
      CCL_INFO(kColl, "metrics: written to %s every %lld s", file.path.c_str(),
               static_cast<long long>(file.interval.count()));
    }
  }

  // mutex_ held. The first communicator starts the thread (none once the process exits).
  void start_thread() {
    if (thread_ != nullptr || stopping_) return;
    // The log's settings are made before the handler is registered, so they outlive it.
    (void)log_enabled(LogLevel::Warn, kColl);
    try {
      thread_ = new std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      throw_error(cclSystemError, "CCL_METRICS_FILE: cannot start the metrics thread: %s",
                  e.what());
    }
    std::atexit(exit_handler);
  }

  void run() {
    pthread_setname_np(pthread_self(), "ccl-metrics");
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      const Clock::time_point now = Clock::now();
      Clock::time_point next = now + std::chrono::hours(1);
      for (auto& [pattern, file] : files_) {
        if (file->live.empty()) continue;
        if (file->next_due <= now) {
          write(*file);
          file->next_due = now + file->interval;
        }
        next = std::min(next, file->next_due);
      }
      wake_.wait_until(lock, next);  // bounded: until the next write is due, or stopped
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::string, std::unique_ptr<File>> files_;  // by pattern; never removed
  std::thread* thread_ = nullptr;                       // never destroyed (joined at exit)
  bool stopping_ = false;
};

namespace {

std::atomic<Exporter*> g_exporter{nullptr};

// This process's exporter; a forked child makes its own (its parent's may hold a lock forever).
Exporter& exporter() {
  Exporter* current = g_exporter.load();
  if (current != nullptr && current->pid == getpid()) return *current;
  Exporter* fresh = new Exporter;
  if (g_exporter.compare_exchange_strong(current, fresh)) return *fresh;
  delete fresh;  // another thread of this process made one first
  return *current;
}

void exit_handler() {
  Exporter* current = g_exporter.load();
  if (current != nullptr && current->pid == getpid()) current->shutdown();
}

}  // namespace

MetricsExport::MetricsExport(const MetricsSettings& settings, const std::string& path, int rank,
                             int nranks)
    : file_(exporter().add(settings, path, rank, nranks, this, &counters_)), pid_(getpid()) {}

MetricsExport::~MetricsExport() {
  if (getpid() == pid_) file_->exporter->remove(*file_, this);
}

void MetricsExport::connected(std::string comm) {
  if (getpid() == pid_) file_->exporter->connected(*file_, this, std::move(comm));
}

void MetricsExport::write_now() {
  if (getpid() == pid_) file_->exporter->write_now(*file_);
}

const std::string& MetricsExport::path() const { return file_->path; }

void write_all_metrics_files() { exporter().write_all(); }

}  // namespace ccl::metrics
