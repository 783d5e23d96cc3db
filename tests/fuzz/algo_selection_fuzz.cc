// CCL_ALGO and CCL_PROTO (core/tuning/algo_selection.h) from arbitrary text: "algo\nproto", each
// up to the first NUL as the environment holds it. Bad syntax is InvalidUsage, nothing else.
#include "base/error.h"
#include "core/tuning/algo_selection.h"
#include "fuzz_check.h"

using namespace ccl;
using namespace ccl::tune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [algo, proto] = fuzz::split_once(fuzz::c_string(data, size), '\n');
  try {
    const Selection s = Selection::parse(algo, proto);
    // Blank values leave everything allowed.
    if (algo.find_first_not_of(" \t\r\n;") == std::string::npos) {
      for (Collective c : kCollectives) {
        for (Algorithm a : kAlgorithms) FUZZ_CHECK(s.allows(c, a));
      }
    }
    if (proto.find_first_not_of(" \t\r\n;") == std::string::npos) {
      for (Collective c : kCollectives) {
        for (Protocol p : kProtocols) FUZZ_CHECK(s.allows(c, p));
      }
    }
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == cclInvalidUsage);
  }

  // The single names (tuner figures, ccl-info, tests): a match names itself back.
  Collective c;
  if (parse_collective(algo, &c)) FUZZ_CHECK(parse_collective(collective_name(c), &c));
  Algorithm a;
  if (parse_algorithm(algo, &a)) FUZZ_CHECK(parse_algorithm(algorithm_name(a), &a));
  Protocol p;
  if (parse_protocol(proto, &p)) FUZZ_CHECK(parse_protocol(protocol_name(p), &p));
  return 0;
}
