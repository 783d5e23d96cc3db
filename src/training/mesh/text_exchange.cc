// all_gather_text and the text form of a place (see text_exchange.h).
#include "mesh/text_exchange.h"

#include <cstdint>
#include <span>

namespace ccl::training {

std::vector<std::string> all_gather_text(Communicator& comm, const std::string& text) {
  const std::size_t n = static_cast<std::size_t>(comm.size());
  // The lengths first, then the texts end to end with the uneven all-gather.
  const std::uint64_t mine = text.size();
  std::vector<std::uint64_t> lengths(n);
  comm.all_gather(std::span(&mine, 1), lengths);
  std::vector<std::size_t> counts(n), displs(n);
  std::size_t total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    counts[r] = static_cast<std::size_t>(lengths[r]);
    displs[r] = total;
    total += counts[r];
  }
  std::vector<char> all(total);
  comm.all_gather_v(std::span<const char>(text.data(), text.size()), all, counts, displs);
  std::vector<std::string> texts(n);
  for (std::size_t r = 0; r < n; ++r) texts[r].assign(all.data() + displs[r], counts[r]);
  return texts;
}

std::string encode_place(const MeshPlace& place) {
  if (place.host.find('\n') != std::string::npos) {
    throw Error(cclInvalidArgument,
                "ccl::training::DeviceMesh: host name '" + place.host + "' holds a newline");
  }
  std::string text = place.host + '\n';
  for (std::size_t i = 0; i < place.locality.size(); ++i) {
    if (i != 0) text += '.';
    text += std::to_string(place.locality[i]);
  }
  return text;
}

MeshPlace decode_place(const std::string& text) {
  MeshPlace place;
  const std::size_t newline = text.find('\n');
  place.host = text.substr(0, newline);
  if (newline == std::string::npos) return place;
  std::size_t start = newline + 1;
  while (start < text.size()) {
    std::size_t end = text.find('.', start);
    if (end == std::string::npos) end = text.size();
    place.locality.push_back(std::stoi(text.substr(start, end - start)));
    start = end + 1;
  }
  return place;
}

}  // namespace ccl::training
