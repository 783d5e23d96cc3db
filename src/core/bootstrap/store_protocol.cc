#include "core/bootstrap/store_protocol.h"

#include <cstring>

namespace ccl::store_wire {

Bytes encode_hello(const Hello& hello) {
  Bytes b;
  b.reserve(kHelloBytes);
  put_u32(b, hello.magic);
  put_u32(b, hello.version);
  b.insert(b.end(), hello.secret.begin(), hello.secret.end());
  put_u32(b, static_cast<uint32_t>(hello.rank));
  put_u32(b, static_cast<uint32_t>(hello.nranks));
  return b;
}

Hello decode_hello(const uint8_t* data) {
  Hello h;
  h.magic = get_u32(data);
  h.version = get_u32(data + 4);
  memcpy(h.secret.data(), data + 8, h.secret.size());
  h.rank = static_cast<int32_t>(get_u32(data + 24));
  h.nranks = static_cast<int32_t>(get_u32(data + 28));
  return h;
}

std::string hello_problem(const Hello& h, const Secret& secret, int expected) {
  if (h.magic != kHelloMagic) return "not a ccl store client (bad magic)";
  if (h.version != kVersion) {
    return "protocol version " + std::to_string(h.version) + ", expected " +
           std::to_string(kVersion);
  }
  if (!secrets_equal(h.secret, secret)) return "wrong secret";
  if (h.nranks < 1 || h.nranks > kMaxRanks || h.rank < 0 || h.rank >= h.nranks) {
    return "rank " + std::to_string(h.rank) + " of " + std::to_string(h.nranks) + " is not valid";
  }
  if (expected > 0 && h.nranks != expected) {
    return "nranks " + std::to_string(h.nranks) + " differs from the " + std::to_string(expected) +
           " announced by earlier ranks";
  }
  return "";
}

namespace {

void put_string(Bytes& b, const std::string& s) {
  put_u32(b, static_cast<uint32_t>(s.size()));
  b.insert(b.end(), s.begin(), s.end());
}

// Walks the fields of one request; every read first checks that enough bytes are buffered.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  // False when fewer than `n` more bytes are buffered; need() then says how many the request
  // takes at least.
  bool have(size_t n) {
    if (size_ - pos_ >= n) return true;
    need_ = pos_ + n;
    return false;
  }
  uint8_t u8() { return data_[pos_++]; }
  uint32_t u32() {
    uint32_t v = get_u32(data_ + pos_);
    pos_ += 4;
    return v;
  }
  uint64_t u64() {
    uint64_t v = get_u64(data_ + pos_);
    pos_ += 8;
    return v;
  }
  const uint8_t* take(size_t n) {
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  size_t pos() const { return pos_; }
  size_t need() const { return need_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  size_t need_ = 0;
};

// A length-prefixed value (u32 length, then the bytes) of at most kMaxValueBytes, into *out:
// kIncomplete until all of it is there, kInvalid (with the announced length) if it is too long.
Parse read_value(Reader& in, Bytes* out, uint32_t* announced) {
  if (!in.have(4)) return Parse::kIncomplete;
  *announced = in.u32();
  if (*announced > kMaxValueBytes) return Parse::kInvalid;
  if (!in.have(*announced)) return Parse::kIncomplete;
  const uint8_t* p = in.take(*announced);
  out->assign(p, p + *announced);
  return Parse::kComplete;
}

}  // namespace

Bytes encode_request(const Request& r) {
  Bytes b;
  b.push_back(static_cast<uint8_t>(r.op));
  put_string(b, r.op == Op::kWait ? std::string() : r.key);
  switch (r.op) {
    case Op::kSet:
      put_u32(b, static_cast<uint32_t>(r.value.size()));
      b.insert(b.end(), r.value.begin(), r.value.end());
      break;
    case Op::kAdd:
      put_u64(b, static_cast<uint64_t>(r.delta));
      break;
    case Op::kWait:
      put_u32(b, static_cast<uint32_t>(r.keys.size()));
      for (const auto& k : r.keys) put_string(b, k);
      break;
    case Op::kGet:
      break;
  }
  return b;
}

Parse parse_request(const uint8_t* data, size_t size, Request* out, size_t* consumed, size_t* need,
                    std::string* error) {
  Reader in(data, size);
  auto incomplete = [&] {
    *need = in.need();
    return Parse::kIncomplete;
  };
  auto invalid = [&](std::string why) {
    *error = std::move(why);
    return Parse::kInvalid;
  };
  auto read_key = [&](std::string* key, Parse* result) {
    if (!in.have(4)) return (*result = incomplete(), false);
    uint32_t len = in.u32();
    if (len > kMaxKeyBytes) {
      return (*result = invalid("key of " + std::to_string(len) + " bytes"), false);
    }
    if (in.pos() + len > kMaxRequestBytes) {
      return (*result = invalid("request over " + std::to_string(kMaxRequestBytes) + " bytes"),
              false);
    }
    if (!in.have(len)) return (*result = incomplete(), false);
    const uint8_t* p = in.take(len);
    if (key != nullptr) key->assign(reinterpret_cast<const char*>(p), len);
    return true;
  };

  Request r;
  Parse result = Parse::kIncomplete;
  if (!in.have(1)) return incomplete();
  uint8_t op = in.u8();
  if (op < static_cast<uint8_t>(Op::kSet) || op > static_cast<uint8_t>(Op::kWait)) {
    return invalid("unknown op " + std::to_string(op));
  }
  r.op = static_cast<Op>(op);
  if (!read_key(&r.key, &result)) return result;
  switch (r.op) {
    case Op::kSet: {
      uint32_t len = 0;
      const Parse value = read_value(in, &r.value, &len);
      if (value == Parse::kIncomplete) return incomplete();
      if (value == Parse::kInvalid) return invalid("value of " + std::to_string(len) + " bytes");
      break;
    }
    case Op::kAdd:
      if (!in.have(8)) return incomplete();
      r.delta = static_cast<int64_t>(in.u64());
      break;
    case Op::kWait: {
      if (!r.key.empty()) return invalid("WAIT with a key before its key list");
      if (!in.have(4)) return incomplete();
      uint32_t count = in.u32();
      if (count > kMaxWaitKeys) return invalid("WAIT for " + std::to_string(count) + " keys");
      // Scan without copying until the whole list is buffered: a list arriving in many small
      // pieces is re-scanned on each, and that must stay cheap.
      size_t list_at = in.pos();
      for (uint32_t i = 0; i < count; ++i) {
        if (!read_key(nullptr, &result)) return result;
      }
      Reader again(data + list_at, size - list_at);
      r.keys.resize(count);
      for (auto& k : r.keys) {
        uint32_t len = again.u32();
        k.assign(reinterpret_cast<const char*>(again.take(len)), len);
      }
      break;
    }
    case Op::kGet:
      break;
  }
  *consumed = in.pos();
  *out = std::move(r);
  return Parse::kComplete;
}

Parse parse_reply(Op op, const uint8_t* data, size_t size, Reply* out, size_t* consumed,
                  size_t* need, std::string* error) {
  Reader in(data, size);
  auto incomplete = [&] {
    *need = in.need();
    return Parse::kIncomplete;
  };
  if (!in.have(1)) return incomplete();
  const uint8_t status = in.u8();
  if (status != kStatusOk) {
    *error = "store server answered with status " + std::to_string(status);
    return Parse::kInvalid;
  }
  Reply r;
  switch (op) {
    case Op::kGet: {
      uint32_t len = 0;
      const Parse value = read_value(in, &r.value, &len);
      if (value == Parse::kIncomplete) return incomplete();
      if (value == Parse::kInvalid) {
        *error = "reply announces " + std::to_string(len) + " bytes";
        return Parse::kInvalid;
      }
      break;
    }
    case Op::kAdd:
      if (!in.have(8)) return incomplete();
      r.counter = in.u64();
      break;
    case Op::kSet:
    case Op::kWait:
      break;
  }
  *consumed = in.pos();
  *out = std::move(r);
  return Parse::kComplete;
}

}  // namespace ccl::store_wire
