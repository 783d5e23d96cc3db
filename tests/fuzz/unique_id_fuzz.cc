// cclUniqueId decoding (core/bootstrap/unique_id.h) from arbitrary bytes: an id arrives through
// whatever channel the application uses (MPI_Bcast, a file), so it may be truncated or scribbled
// on. The first 128 bytes are the id (zero-padded); the whole input is also tried as
// CCL_COMM_SECRET's hex text.
#include <algorithm>
#include <cstring>

#include "core/bootstrap/unique_id.h"
#include "base/error.h"
#include "fuzz_check.h"

using namespace ccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(id.internal, data, std::min(size, sizeof(id.internal)));
  try {
    const UniqueIdContents contents = decode_unique_id(id);
    // Every byte of a valid id means something or must be zero, so decoding loses nothing.
    const cclUniqueId again = encode_unique_id(contents);
    FUZZ_CHECK(std::memcmp(&again, &id, sizeof(id)) == 0);
    FUZZ_CHECK(contents.root.port() != 0);
    FUZZ_CHECK(contents.root.family() == AF_INET || contents.root.family() == AF_INET6);
    FUZZ_CHECK(!contents.root.to_string().empty());
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == cclInvalidArgument);
  }

  const std::string hex = fuzz::c_string(data, size);
  Secret secret{};
  if (secret_from_hex(hex, &secret)) {
    std::string lower = hex;
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    FUZZ_CHECK(secret_to_hex(secret) == lower);
  }
  return 0;
}
