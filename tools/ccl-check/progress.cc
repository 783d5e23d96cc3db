#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace ccl_check {

namespace {

std::string duration_text(double s) {
  const long total = std::lround(std::max(0.0, s));
  char buf[32];
  if (total >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", total / 60, total % 60);
  }
  return buf;
}

}  // namespace

Progress::Progress(bool show, std::FILE* out)
    : show_(show),
      out_(out),
      terminal_(show && isatty(fileno(out)) != 0),
      started_(std::chrono::steady_clock::now()) {}

std::string Progress::line(const std::string& what, int done, int planned, double elapsed_s) {
  std::string text = "[" + std::to_string(done) + "/" + std::to_string(std::max(done, planned)) +
                     "] " + what + " (" + duration_text(elapsed_s);
  // The time left from the mean time per step so far: steps are alike enough for an estimate.
  if (done > 1 && planned > done) {
    text += ", ~" + duration_text(elapsed_s / (done - 1) * (planned - done + 1)) + " left";
  }
  return text + ")";
}

void Progress::step(const std::string& what) {
  if (!show_) return;
  ++done_;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const std::string text = line(what, done_, planned_, elapsed);
  if (terminal_) {
    // Carriage return and erase-line: the status line is redrawn in place.
    std::fprintf(out_, "\r\033[Kccl-check: %s", text.c_str());
    drawn_ = true;
  } else {
    std::fprintf(out_, "ccl-check: %s\n", text.c_str());
  }
  std::fflush(out_);
}

void Progress::note(const std::string& what) {
  if (!show_) return;
  finish();
  std::fprintf(out_, "ccl-check: %s\n", what.c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (!drawn_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace ccl_check
