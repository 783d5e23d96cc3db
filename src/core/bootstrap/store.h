// The rendezvous store (Gloo's idea): set/get/add/wait on string keys is the only primitive the
// bootstrap and the transports use to exchange connection details.
//   InMemoryStore : threads of one process (loopback tests)
//   TcpStore      : a client of a StoreServer (tcp_store.h), the rendezvous between processes
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/deadline.h"

namespace ccl {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until the key exists (or the deadline: Timeout; or abort: RemoteError).
  virtual Bytes get(const std::string& key, Deadline deadline) = 0;
  // Atomically adds `delta` to the integer stored at key (missing: 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Blocks until every key exists.
  virtual void wait(const std::vector<std::string>& keys, Deadline deadline) = 0;
};

class InMemoryStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<std::string, Bytes> map_;
};

// Prefixes every key, so that several communicators can share one store.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, Store& inner) : prefix_(std::move(prefix)), inner_(inner) {}
  void set(const std::string& key, const Bytes& value) override {
    inner_.set(prefix_ + key, value);
  }
  Bytes get(const std::string& key, Deadline d) override { return inner_.get(prefix_ + key, d); }
  int64_t add(const std::string& key, int64_t delta) override {
    return inner_.add(prefix_ + key, delta);
  }
  void wait(const std::vector<std::string>& keys, Deadline d) override;

 private:
  std::string prefix_;
  Store& inner_;
};

// Helpers on top of the primitive.
Bytes to_bytes(const std::string& s);
std::string to_string(const Bytes& b);
// Every one of `nranks` callers returns once all have arrived at barrier `name`.
void store_barrier(Store& store, const std::string& name, int nranks, Deadline deadline);

}  // namespace ccl
