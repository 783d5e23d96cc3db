// TorchStoreClient against a fake TCPStore that speaks torch 2.x's wire format
// (torch_store_client.h): the validation that opens a connection, the bytes of each request, the
// answers, a wait that completes when another client sets the key, a server that hangs up, a
// deadline. torch.torchrun_all_reduce_perf runs the client against torch's own store.
#include "core/bootstrap/torch_store_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

using namespace ccl;
using namespace std::chrono_literals;

namespace {

// One thread per connection; a map of keys; WAIT answers once the key exists.
class FakeTorchStore {
 public:
  explicit FakeTorchStore(bool hang_up = false) : hang_up_(hang_up) {
    listener_ = Socket::listen(SocketAddress::parse("127.0.0.1:0"));
    address_ = listener_.local_address();
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeTorchStore() {
    stop_ = true;
    cv_.notify_all();
    // Wake accept() with a connection of our own.
    try {
      Socket::connect(address_, Deadline::after(1000ms));
    } catch (...) {
    }
    acceptor_.join();
    for (auto& t : workers_) t.join();
  }
  const SocketAddress& address() const { return address_; }
  std::vector<uint8_t> first_request;   // the bytes of the first SET seen, for the wire check
  std::atomic<bool> validated_{false};  // a connection opened with torch's validation

 private:
  template <typename T>
  T read(Socket& s) {
    T v{};
    s.recv_all(&v, sizeof(v), Deadline::after(5000ms));
    return v;
  }
  std::string read_string(Socket& s) {
    auto n = read<uint64_t>(s);
    std::string out(n, '\0');
    s.recv_all(out.data(), n, Deadline::after(5000ms));
    return out;
  }
  void serve(Socket s) {
    try {
      // As torch's server: a connection that does not open with VALIDATE and the magic number
      // is closed.
      if (read<uint8_t>(s) != TorchStoreClient::kValidate ||
          read<uint32_t>(s) != TorchStoreClient::kValidationMagic) {
        return;
      }
      validated_ = true;
      for (;;) {
        auto q = read<uint8_t>(s);
        if (hang_up_) return;
        if (q == TorchStoreClient::kSet) {
          std::string key = read_string(s);
          std::string value = read_string(s);
          std::lock_guard<std::mutex> lock(mutex_);
          if (first_request.empty()) {
            uint64_t kn = key.size(), vn = value.size();
            first_request.push_back(q);
            auto put = [&](const void* p, size_t n) {
              auto* b = static_cast<const uint8_t*>(p);
              first_request.insert(first_request.end(), b, b + n);
            };
            put(&kn, 8);
            put(key.data(), kn);
            put(&vn, 8);
            put(value.data(), vn);
          }
          keys_[key] = value;
          cv_.notify_all();
        } else if (q == TorchStoreClient::kWait) {
          auto n = read<uint64_t>(s);
          std::vector<std::string> keys;
          for (uint64_t i = 0; i < n; ++i) keys.push_back(read_string(s));
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [&] {
            if (stop_) return true;
            for (auto& k : keys) {
              if (!keys_.count(k)) return false;
            }
            return true;
          });
          if (stop_) return;
          uint8_t stop_waiting = 0;
          s.send_all(&stop_waiting, 1, Deadline::after(5000ms));
        } else if (q == TorchStoreClient::kGet) {
          std::string key = read_string(s);
          std::string value;
          {
            std::lock_guard<std::mutex> lock(mutex_);
            value = keys_.at(key);
          }
          uint64_t n = value.size();
          s.send_all(&n, 8, Deadline::after(5000ms));
          s.send_all(value.data(), n, Deadline::after(5000ms));
        } else if (q == TorchStoreClient::kAdd) {
          std::string key = read_string(s);
          auto delta = read<int64_t>(s);
          int64_t now = 0;
          {
            std::lock_guard<std::mutex> lock(mutex_);
            std::string& v = keys_[key];
            if (!v.empty()) now = std::stoll(v);
            now += delta;
            v = std::to_string(now);  // torch keeps counters as decimal text
            cv_.notify_all();
          }
          s.send_all(&now, 8, Deadline::after(5000ms));
        } else {
          return;
        }
      }
    } catch (...) {
    }
  }
  void accept_loop() {
    while (!stop_) {
      try {
        Socket s = listener_.accept(Deadline::after(200ms));
        if (stop_) return;
        workers_.emplace_back([this, sock = std::move(s)]() mutable { serve(std::move(sock)); });
      } catch (...) {
      }
    }
  }

  bool hang_up_;
  Socket listener_;
  SocketAddress address_;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::string> keys_;
  std::atomic<bool> stop_{false};
};

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

TEST(TorchStoreClient, SetWritesTorchsWireFormat) {
  FakeTorchStore server;
  auto client = TorchStoreClient::connect(server.address(), Deadline::after(5000ms));
  client.set("k1", {'v', 0, 'v'}, Deadline::after(5000ms));
  // Read it back, which also orders the server's record of the SET before our check.
  EXPECT_EQ(client.get("k1", Deadline::after(5000ms)), (std::vector<uint8_t>{'v', 0, 'v'}));
  // The bytes torch 2.x's own client sends for set("k1", b"v\0v") (after its "/" key prefix):
  // 01 | 02 00 00 00 00 00 00 00 | "k1" | 03 00 00 00 00 00 00 00 | 76 00 76.
  const std::vector<uint8_t> want = {1, 2, 0, 0, 0, 0, 0, 0, 0,   'k', '1',
                                     3, 0, 0, 0, 0, 0, 0, 0, 'v', 0,   'v'};
  EXPECT_EQ(server.first_request, want);
  EXPECT_TRUE(server.validated_.load());
}

TEST(TorchStoreClient, GetWaitsForAnotherClientsSet) {
  FakeTorchStore server;
  auto reader = TorchStoreClient::connect(server.address(), Deadline::after(5000ms));
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    auto w = TorchStoreClient::connect(server.address(), Deadline::after(5000ms));
    w.set("ccl/none/0/0", bytes("unique id"), Deadline::after(5000ms));
  });
  EXPECT_EQ(reader.get("ccl/none/0/0", Deadline::after(10000ms)), bytes("unique id"));
  writer.join();
}

TEST(TorchStoreClient, AddCounts) {
  FakeTorchStore server;
  auto client = TorchStoreClient::connect(server.address(), Deadline::after(5000ms));
  EXPECT_EQ(client.add("n", 5, Deadline::after(5000ms)), 5);
  EXPECT_EQ(client.add("n", -2, Deadline::after(5000ms)), 3);
}

TEST(TorchStoreClient, AServerThatHangsUpNamesCclCommId) {
  FakeTorchStore server(/*hang_up=*/true);
  auto client = TorchStoreClient::connect(server.address(), Deadline::after(5000ms));
  try {
    client.add("n", 1, Deadline::after(5000ms));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclRemoteError);
    EXPECT_NE(std::string(e.what()).find("CCL_COMM_ID"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("torch 2.x"), std::string::npos) << e.what();
  }
}

TEST(TorchStoreClient, AWaitForAKeyNobodySetsTimesOut) {
  FakeTorchStore server;
  auto client = TorchStoreClient::connect(server.address(), Deadline::after(5000ms));
  const auto start = std::chrono::steady_clock::now();
  try {
    client.get("never", Deadline::after(300ms));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}
