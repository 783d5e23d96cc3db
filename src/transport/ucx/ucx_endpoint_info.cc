#include "transport/ucx/ucx_endpoint_info.h"

#include <cstdio>
#include <cstdlib>

namespace ccl::transport::ucx {

std::string endpoint_info(ucp_ep_h ep) {
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (stream == nullptr) return "";
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  std::string result(text, size);
  std::free(text);
  return result;
}

bool has_rma_lane(std::string_view info) {
  size_t start = 0;
  while (start < info.size()) {
    size_t end = info.find('\n', start);
    if (end == std::string_view::npos) end = info.size();
    const std::string_view line = info.substr(start, end - start);
    if (line.find("lane[") != std::string_view::npos &&
        (line.find(" rma#") != std::string_view::npos ||
         line.find(" rma_bw#") != std::string_view::npos)) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

}  // namespace ccl::transport::ucx
