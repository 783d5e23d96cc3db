#include "core/bootstrap/store.h"

#include <cstring>

#include "base/error.h"

namespace ccl {

void InMemoryStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    map_[key] = value;
  }
  changed_.notify_all();
}

Bytes InMemoryStore::get(const std::string& key, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
    if (changed_.wait_until(lock, deadline.at()) == std::cv_status::timeout && deadline.expired()) {
      throw_error(cclTimeout, "store: timed out waiting for key '%s'", key.c_str());
    }
  }
}

int64_t InMemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Bytes& stored = map_[key];
    if (stored.size() == sizeof(int64_t)) memcpy(&value, stored.data(), sizeof(value));
    value += delta;
    stored.resize(sizeof(int64_t));
    memcpy(stored.data(), &value, sizeof(value));
  }
  changed_.notify_all();
  return value;
}

void InMemoryStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  for (const auto& key : keys) get(key, deadline);
}

void PrefixStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const auto& key : keys) prefixed.push_back(prefix_ + key);
  inner_.wait(prefixed, deadline);
}

Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

void store_barrier(Store& store, const std::string& name, int nranks, Deadline deadline) {
  // The last to arrive publishes the "done" key that everyone waits for.
  int64_t arrived = store.add(name + "/count", 1);
  if (arrived == nranks) store.set(name + "/done", Bytes{1});
  store.get(name + "/done", deadline);
}

}  // namespace ccl
