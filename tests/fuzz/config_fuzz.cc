// The syntax of CCL_* values (base/config.h): integers, byte sizes with K/M/G suffixes and
// booleans, as config_int and config_bool read them from the environment, and the interface
// filter of CCL_SOCKET_IFNAME (core/bootstrap/socket.h). Input: a value (up to the first NUL, as
// the environment holds it); for the filter, "filter\nname".
#include <cinttypes>

#include "core/bootstrap/socket.h"
#include "base/config.h"
#include "fuzz_check.h"

using namespace ccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::c_string(data, size);

  int64_t number = 0;
  const bool is_int = parse_int(text, &number);
  if (is_int) {
    // What the value says, whatever blanks or sign strtoll allowed around it.
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRId64, number);
    int64_t again = 0;
    FUZZ_CHECK(parse_int(buf, &again) && again == number);
  }

  int64_t bytes = 0;
  if (parse_bytes(text, &bytes)) {
    FUZZ_CHECK(bytes >= 0);
    // Without a suffix a size is an integer; with one it is a multiple of its unit.
    const char last = text.back();
    if (last == 'k' || last == 'K') FUZZ_CHECK(bytes % 1024 == 0);
    if (last == 'm' || last == 'M') FUZZ_CHECK(bytes % (1024 * 1024) == 0);
    if (last == 'g' || last == 'G') FUZZ_CHECK(bytes % (1024 * 1024 * 1024) == 0);
    if (std::string("kKmMgG").find(last) == std::string::npos)
      FUZZ_CHECK(is_int && bytes == number);
  } else if (is_int) {
    FUZZ_CHECK(number < 0);  // a plain non-negative integer is always a size
  }

  bool flag = false;
  if (parse_bool(text, &flag)) FUZZ_CHECK(text.size() <= 5);

  // "^list" excludes what "list" selects; a list without names selects everything.
  const auto [filter, name] = fuzz::split_once(text, '\n');
  const bool matches = interface_matches(name, filter);
  if (filter.empty() || filter[0] != '^') {
    const bool has_names =
        filter.find_first_not_of(",") != std::string::npos &&
        filter.find_first_not_of(",", filter[0] == '=' ? 1 : 0) != std::string::npos;
    FUZZ_CHECK(has_names || matches);
    FUZZ_CHECK(interface_matches(name, "^" + filter) == (has_names ? !matches : true));
  }
  return 0;
}
