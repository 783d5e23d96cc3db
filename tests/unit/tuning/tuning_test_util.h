// Shapes and figures shared by the tuning tests.
#pragma once

#include <string>
#include <utility>

#include "base/error.h"
#include "core/tuning/cost_model.h"

namespace ccl::tune::test {

// n ranks on one host over shm, with a shared window of `window` bytes (0: none).
inline Shape one_host(int n, size_t window, size_t chunk = 1 << 20) {
  Shape s;
  s.nranks = n;
  s.nhosts = 1;
  s.ranks_per_host = n;
  s.uniform_hosts = true;
  s.shm = true;
  s.window_bytes = window;
  s.chunk_bytes = chunk;
  return s;
}

// `hosts` hosts of `per_host` ranks each, shm inside a host, no direct path.
inline Shape many_hosts(int hosts, int per_host, size_t chunk = 1 << 20) {
  Shape s = one_host(hosts * per_host, 0, chunk);
  s.nhosts = hosts;
  s.ranks_per_host = per_host;
  return s;
}

inline Figures uniform_figures(double alpha_us, double beta_gbps, double reduce_gbps) {
  Figures f;
  f.shm = f.net = f.direct = LinkFigures{alpha_us, beta_gbps};
  f.reduce_gbps = reduce_gbps;
  return f;
}

// The code and message of the ccl::Error `body` throws; code 0 if it throws none.
template <typename Body>
std::pair<int, std::string> error_of(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {0, ""};
}

}  // namespace ccl::tune::test
