// The tuner figures file (core/tuning/tuner.h, read_figures_file; CCL_TUNER_FILE) from arbitrary
// text. Figures that load are usable (check_figures accepts them), and writing them with
// format_figures and reading that back gives the same doubles.
#include <cstring>

#include "base/error.h"
#include "core/tuning/tuner.h"
#include "fuzz_check.h"

using namespace ccl;
using namespace ccl::tune;

namespace {

bool same(const Figures& a, const Figures& b) {
  const LinkFigures* la[] = {&a.shm, &a.net, &a.direct};
  const LinkFigures* lb[] = {&b.shm, &b.net, &b.direct};
  for (int i = 0; i < 3; ++i) {
    if (std::memcmp(la[i], lb[i], sizeof(LinkFigures)) != 0) return false;
  }
  return a.reduce_gbps == b.reduce_gbps;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::InputFile file("figures.txt");
  file.write(data, size);
  Figures figures;
  try {
    figures = read_figures_file(file.path());
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == cclInvalidArgument);
    FUZZ_CHECK(std::strstr(e.what(), file.path().c_str()) != nullptr);  // errors name the file
    return 0;
  }
  check_figures(figures, "fuzz");  // throws (uncaught: a finding) if they are not usable
  const std::string text = format_figures(figures);
  file.write(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  FUZZ_CHECK(same(read_figures_file(file.path()), figures));
  return 0;
}
