#include "transport_test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <thread>

#include "base/error.h"

namespace ccl::test {

void require(bool condition, const std::string& message) {
  if (!condition) fail(message);
}

void fail(const std::string& message) { throw std::runtime_error(message); }

std::string unique_tag() {
  static std::atomic<int> counter{0};
  return "t" + std::to_string(getpid()) + "x" + std::to_string(counter++);
}

std::vector<std::string> shm_files_of(const std::string& tag) {
  std::vector<std::string> found;
  std::string prefix = "ccl-" + tag + "-";
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (struct dirent* entry = readdir(dir)) {
    if (strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) found.push_back(entry->d_name);
  }
  closedir(dir);
  return found;
}

namespace {

uint64_t pattern_word(int src, int dst, int index, uint64_t word) {
  uint64_t x = word * 0x9E3779B97F4A7C15ull + (static_cast<uint64_t>(src) << 40) +
               (static_cast<uint64_t>(dst) << 52) +
               static_cast<uint64_t>(index + 1) * 0x2545F4914F6CDD1Dull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

}  // namespace

std::byte pattern_byte(int src, int dst, int index, size_t i) {
  return static_cast<std::byte>(pattern_word(src, dst, index, i / 8) >> (8 * (i % 8)));
}

void fill_pattern(std::byte* out, size_t bytes, int src, int dst, int index) {
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w = pattern_word(src, dst, index, i / 8);
    memcpy(out + i, &w, 8);  // little-endian: byte k of the word is byte i + k
  }
  for (; i < bytes; ++i) out[i] = pattern_byte(src, dst, index, i);
}

std::string check_pattern(const std::byte* data, size_t bytes, int src, int dst, int index,
                          size_t offset) {
  for (size_t i = 0; i < bytes; ++i) {
    size_t at = offset + i;
    if (at % 8 == 0 && i + 8 <= bytes) {  // whole words at a time where possible
      uint64_t w = pattern_word(src, dst, index, at / 8);
      if (memcmp(data + i, &w, 8) == 0) {
        i += 7;
        continue;
      }
    }
    if (data[i] != pattern_byte(src, dst, index, at)) {
      std::ostringstream out;
      out << "message " << index << " " << src << "->" << dst << ": wrong byte at " << at;
      return out.str();
    }
  }
  return "";
}

void PieceChecker::piece(size_t offset, size_t length) {
  ++pieces_;
  if (!error_.empty()) return;
  std::ostringstream out;
  if (offset != next_) {
    out << "piece at " << offset << " but " << next_ << " expected";
  } else if (offset % transport::kPieceAlign != 0) {
    out << "piece offset " << offset << " not aligned";
  } else if (length == 0 || offset + length > total_) {
    out << "piece [" << offset << ", +" << length << ") outside a message of " << total_;
  } else if (offset + length != total_ && length % transport::kPieceAlign != 0) {
    out << "inner piece of " << length << " bytes at " << offset;
  }
  error_ = out.str();
  next_ = offset + length;
}

std::string PieceChecker::result() const {
  if (!error_.empty()) return error_;
  if (next_ != total_) return "received " + std::to_string(next_) + " of " + std::to_string(total_);
  return "";
}

void CopySink::consume(const std::byte* piece, size_t offset, size_t length) {
  checker_.piece(offset, length);
  if (checker_.ok()) memcpy(destination_ + offset, piece, length);  // range checked
}

void VerifySink::consume(const std::byte* piece, size_t offset, size_t length) {
  checker_.piece(offset, length);
  if (!error_.empty() || !checker_.ok()) return;
  error_ = check_pattern(piece, length, src_, dst_, index_, offset);
}

size_t drive(transport::Transport& transport, std::span<transport::Connection* const> connections,
             const std::function<bool()>& done, Deadline deadline,
             std::chrono::microseconds wait_slice) {
  size_t waits = 0;
  while (!done()) {
    bool moved = false;
    for (transport::Connection* c : connections) {
      if (c != nullptr) moved |= c->progress();
    }
    if (moved || done()) continue;
    if (deadline.expired()) throw_error(cclTimeout, "test: transfer did not finish in time");
    transport.wait(deadline.remaining(wait_slice));
    ++waits;
  }
  return waits;
}

void exchange_matrix(transport::Transport& transport,
                     const std::vector<transport::Connection*>& by_peer, int rank, int nranks,
                     const std::vector<size_t>& sizes, Deadline deadline,
                     std::chrono::microseconds wait_slice) {
  struct Outgoing {
    std::vector<std::byte> buffer;
    transport::SendRequest request;
  };
  struct Incoming {
    std::vector<std::byte> buffer;
    std::unique_ptr<CopySink> copy;
    std::unique_ptr<VerifySink> verify;
    transport::RecvRequest request;
    int src;
    int index;
  };
  std::vector<std::unique_ptr<Outgoing>> sends;
  std::vector<std::unique_ptr<Incoming>> recvs;
  for (int m = 0; m < static_cast<int>(sizes.size()); ++m) {
    size_t bytes = sizes[m];
    size_t skew = static_cast<size_t>(m % 4) + 1;  // user buffers of any alignment
    for (int p = 0; p < nranks; ++p) {
      if (p == rank) continue;
      auto in = std::make_unique<Incoming>();
      in->src = p;
      in->index = m;
      if ((m + p) % 2 == 0) {
        in->buffer.resize(bytes + skew);
        in->copy = std::make_unique<CopySink>(in->buffer.data() + skew, bytes);
        in->request.sink = in->copy.get();
      } else {
        in->verify = std::make_unique<VerifySink>(bytes, p, rank, m);
        in->request.sink = in->verify.get();
      }
      in->request.bytes = bytes;
      by_peer[p]->post_recv(&in->request);
      recvs.push_back(std::move(in));

      auto out = std::make_unique<Outgoing>();
      out->buffer.resize(bytes + skew);
      fill_pattern(out->buffer.data() + skew, bytes, rank, p, m);
      out->request.data = out->buffer.data() + skew;
      out->request.bytes = bytes;
      by_peer[p]->post_send(&out->request);
      sends.push_back(std::move(out));
    }
  }
  drive(
      transport, by_peer,
      [&] {
        for (auto& s : sends)
          if (!s->request.complete) return false;
        for (auto& r : recvs)
          if (!r->request.complete) return false;
        return true;
      },
      deadline, wait_slice);
  for (auto& s : sends) {
    require(s->request.done_bytes == s->request.bytes, "send done_bytes != bytes");
  }
  for (auto& r : recvs) {
    size_t bytes = r->request.bytes;
    require(r->request.done_bytes == bytes, "recv done_bytes != bytes");
    std::string error;
    if (r->copy) {
      error = r->copy->checker().result();
      size_t skew = static_cast<size_t>(r->index % 4) + 1;
      if (error.empty())
        error = check_pattern(r->buffer.data() + skew, bytes, r->src, rank, r->index);
    } else {
      error = r->verify->result();
    }
    require(error.empty(), "rank " + std::to_string(rank) + " from " + std::to_string(r->src) +
                               " message " + std::to_string(r->index) + ": " + error);
  }
}

FileStore::FileStore() : creator_pid_(getpid()) {
  char name[] = "/tmp/ccl-filestore-XXXXXX";
  if (mkdtemp(name) == nullptr) throw std::runtime_error("mkdtemp failed");
  directory_ = name;
}

FileStore::~FileStore() {
  if (getpid() != creator_pid_) return;
  DIR* dir = opendir(directory_.c_str());
  if (dir != nullptr) {
    while (struct dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.' && (entry->d_name[1] == '\0' || entry->d_name[1] == '.'))
        continue;
      unlink((directory_ + "/" + entry->d_name).c_str());
    }
    closedir(dir);
  }
  rmdir(directory_.c_str());
}

std::string FileStore::path(const std::string& key) const {
  std::string name;
  char hex[3];
  for (unsigned char c : key) {
    snprintf(hex, sizeof(hex), "%02x", c);
    name += hex;
  }
  return directory_ + "/k" + name;
}

void FileStore::set(const std::string& key, const Bytes& value) {
  // Write aside, then rename: readers never see a partial value.
  static std::atomic<int> counter{0};
  std::string tmp =
      directory_ + "/.tmp" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.size()));
    if (!out) throw std::runtime_error("FileStore: cannot write " + tmp);
  }
  if (rename(tmp.c_str(), path(key).c_str()) != 0) throw std::runtime_error("FileStore: rename");
}

Bytes FileStore::get(const std::string& key, Deadline deadline) {
  std::string file = path(key);
  for (;;) {
    std::ifstream in(file, std::ios::binary);
    if (in) return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (deadline.expired()) {
      throw_error(cclTimeout, "store: timed out waiting for key '%s'", key.c_str());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  int lock = open((directory_ + "/.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) throw std::runtime_error("FileStore: lock");
  int64_t value = 0;
  {
    std::ifstream in(path(key), std::ios::binary);
    Bytes old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (old.size() == sizeof(value)) memcpy(&value, old.data(), sizeof(value));
  }
  value += delta;
  Bytes now(sizeof(value));
  memcpy(now.data(), &value, sizeof(value));
  set(key, now);
  close(lock);  // releases the flock
  return value;
}

void FileStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  for (const auto& key : keys) get(key, deadline);
}

void ThreadBarrier::arrive_and_wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  int generation = generation_;
  if (++arrived_ == count_) {
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
    return;
  }
  if (!changed_.wait_for(lock, timeout, [&] { return generation_ != generation; })) {
    throw std::runtime_error("test barrier timed out");
  }
}

}  // namespace ccl::test
