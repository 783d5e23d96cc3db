// What cclCommInitFromEnv reads from the launcher (core/launch/launcher_env.h): ranks, sizes, the
// rendezvous address (host:port, [v6]:port) and the secret, through the injectable lookup. Input:
// "NAME=value" lines, the environment the lookup sees (a later line for a name wins).
#include <map>

#include "base/error.h"
#include "core/launch/launcher_env.h"
#include "fuzz_check.h"

using namespace ccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> env;
  std::string text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    auto [line, rest] = fuzz::split_once(text, '\n');
    const auto [name, value] = fuzz::split_once(line, '=');
    // The environment's values are C strings.
    env[name] = value.substr(0, value.find('\0'));
    text = std::move(rest);
  }
  const EnvLookup lookup = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  try {
    const LauncherEnv e = read_launcher_env(lookup);
    FUZZ_CHECK(!e.launcher.empty());
    FUZZ_CHECK(e.nranks >= 1 && e.rank >= 0 && e.rank < e.nranks);
    FUZZ_CHECK(e.local_rank >= -1 && e.local_rank < e.nranks);
    FUZZ_CHECK(e.listen_fd == -1 || (e.rank == 0 && e.listen_fd >= 0));
    // An address is host:port or [host]:port with a port in 1..65535.
    const size_t colon = e.address.rfind(':');
    FUZZ_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < e.address.size());
    const int port = std::atoi(e.address.c_str() + colon + 1);
    FUZZ_CHECK(port >= 1 && port <= 65535);
  } catch (const Error& err) {
    FUZZ_CHECK(err.code() == cclInvalidUsage);
  }
  return 0;
}
