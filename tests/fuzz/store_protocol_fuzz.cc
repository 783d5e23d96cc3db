// The bootstrap store's wire format (core/bootstrap/store_protocol.h) from arbitrary bytes: the
// server parses requests and hellos from any process that can reach its port, the client parses
// replies. The first byte picks the message kind; the rest is the message.
#include <cstring>

#include "core/bootstrap/store_protocol.h"
#include "fuzz_check.h"

using namespace ccl;
using namespace ccl::store_wire;

namespace {

// Parses requests back to back, as the server does with a client's buffered input. A complete
// request must re-encode to exactly the bytes it came from, and any shorter prefix of it must be
// incomplete and ask for no more than the request takes: the server waits for `need` bytes, so
// a larger need would stall a well-behaved client, a need not above the buffered size would spin.
void requests(const uint8_t* data, size_t size) {
  size_t at = 0;
  while (at < size) {
    const uint8_t* p = data + at;
    const size_t left = size - at;
    Request r;
    size_t consumed = 0, need = 0;
    std::string error;
    const Parse result = parse_request(p, left, &r, &consumed, &need, &error);
    if (result == Parse::kInvalid) {
      FUZZ_CHECK(!error.empty());
      return;
    }
    if (result == Parse::kIncomplete) {
      FUZZ_CHECK(need > left);
      FUZZ_CHECK(need <= kMaxRequestBytes);
      return;
    }
    FUZZ_CHECK(consumed > 0 && consumed <= left);
    const ccl::Bytes again = encode_request(r);
    FUZZ_CHECK(again.size() == consumed && std::memcmp(again.data(), p, consumed) == 0);
    Request partial;
    size_t partial_consumed = 0, partial_need = 0;
    FUZZ_CHECK(parse_request(p, consumed - 1, &partial, &partial_consumed, &partial_need, &error) ==
               Parse::kIncomplete);
    FUZZ_CHECK(partial_need > consumed - 1 && partial_need <= consumed);
    at += consumed;
  }
}

// The server's first kHelloBytes from a client, judged against a secret and an expected size
// that come from the input too (so that accepting paths are reached).
void hello(const uint8_t* data, size_t size) {
  if (size < kHelloBytes) return;
  const Hello h = decode_hello(data);
  const ccl::Bytes again = encode_hello(h);
  FUZZ_CHECK(again.size() == kHelloBytes && std::memcmp(again.data(), data, kHelloBytes) == 0);
  fuzz::FieldReader rest(data + kHelloBytes, size - kHelloBytes);
  Secret secret = h.secret;
  if (rest.u8() & 1) secret[rest.u8() % secret.size()] ^= 1;  // a near miss
  const int expected = static_cast<int>(rest.u32());
  const std::string why = hello_problem(h, secret, expected);
  if (why.empty()) {
    FUZZ_CHECK(h.magic == kHelloMagic && h.version == kVersion && secrets_equal(h.secret, secret));
    FUZZ_CHECK(h.rank >= 0 && h.rank < h.nranks && h.nranks <= kMaxRanks);
    FUZZ_CHECK(expected <= 0 || expected == h.nranks);
  }
}

// The client's view of one reply to a request of the op the first byte names.
void reply(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const auto op = static_cast<Op>(1 + data[0] % 4);
  data += 1;
  size -= 1;
  Reply r;
  size_t consumed = 0, need = 0;
  std::string error;
  const Parse result = parse_reply(op, data, size, &r, &consumed, &need, &error);
  if (result == Parse::kInvalid) {
    FUZZ_CHECK(!error.empty());
  } else if (result == Parse::kIncomplete) {
    FUZZ_CHECK(need > size && need <= 1 + 4 + kMaxValueBytes);
  } else {
    FUZZ_CHECK(consumed > 0 && consumed <= size && data[0] == kStatusOk);
    FUZZ_CHECK(op != Op::kGet || consumed == 5 + r.value.size());
    FUZZ_CHECK(op != Op::kAdd || (consumed == 9 && r.counter == get_u64(data + 1)));
    FUZZ_CHECK(op == Op::kGet || op == Op::kAdd || consumed == 1);
    Reply partial;
    size_t partial_consumed = 0, partial_need = 0;
    FUZZ_CHECK(parse_reply(op, data, consumed - 1, &partial, &partial_consumed, &partial_need,
                           &error) == Parse::kIncomplete);
    FUZZ_CHECK(partial_need > consumed - 1 && partial_need <= consumed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0:
      requests(data + 1, size - 1);
      break;
    case 1:
      hello(data + 1, size - 1);
      break;
    case 2:
      reply(data + 1, size - 1);
      break;
  }
  return 0;
}
