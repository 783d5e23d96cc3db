// The tcp transport's setup messages (transport/tcp/tcp_wire.h) from arbitrary bytes: anything
// that can reach a rank's listening port may send a hello, and a wrong process may answer at a
// published address with an "ack". Input: a Hello (host byte order, as on the wire), then the
// receiving rank, nranks, the peer a connecting rank expects, and the communicator tag, which is
// also tried as the "host:port token" value a rank publishes in the store.
#include <cstring>

#include "base/error.h"
#include "fuzz_check.h"
#include "transport/tcp/tcp_handshake.h"

using namespace ccl::transport::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(Hello)) return 0;
  Hello h;
  std::memcpy(&h, data, sizeof(h));
  ccl::fuzz::FieldReader rest(data + sizeof(Hello), size - sizeof(Hello));
  const int rank = static_cast<int>(rest.u32());
  const int nranks = static_cast<int>(rest.u32());
  const int peer = static_cast<int>(rest.u32());
  const std::string tag(reinterpret_cast<const char*>(rest.rest()), rest.rest_size());
  const uint64_t hash = tag_hash(tag);

  const std::string why = hello_problem(h, rank, nranks, hash);
  if (why.empty()) {
    // Accepted: a hello of this communicator from a rank above ours, inside it.
    FUZZ_CHECK(h.magic == kHelloMagic && h.version == kHelloVersion && h.kind == kHelloKindHello);
    FUZZ_CHECK(h.tag_hash == hash && h.nranks == nranks && h.rank > rank && h.rank < nranks);
  }
  if (ack_matches(h, peer, nranks, hash)) {
    FUZZ_CHECK(h.kind == kHelloKindAck && h.rank == peer && h.nranks == nranks);
    FUZZ_CHECK(!hello_problem(h, rank, nranks, hash).empty());  // an ack is never a hello
  }

  // The listener address and token a rank publishes through the store; the tag bytes stand in.
  try {
    const Handshake::Published p = Handshake::decode_published(tag);
    const Handshake::Published again =
        Handshake::decode_published(Handshake::encode_published(p.address, p.token));
    FUZZ_CHECK(again.address == p.address && again.token == p.token);
  } catch (const ccl::Error& e) {
    FUZZ_CHECK(e.code() == cclRemoteError);
  }
  return 0;
}
