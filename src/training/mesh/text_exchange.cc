// all_gather_text and the text form of a place (see text_exchange.h).
#include "mesh/text_exchange.h"

#include <algorithm>
#include <cstdint>
#include <span>

namespace ccl::training {

std::vector<std::string> all_gather_text(Communicator& comm, const std::string& text) {
  const std::size_t n = static_cast<std::size_t>(comm.size());
  const std::int64_t mine = static_cast<std::int64_t>(text.size());
  std::vector<std::int64_t> lengths(n);
  comm.all_gather(std::span(&mine, 1), lengths);
  const std::size_t longest =
      static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<char> send(std::max<std::size_t>(longest, 1), '\0');
  std::copy(text.begin(), text.end(), send.begin());
  std::vector<char> all(send.size() * n);
  comm.all_gather(send, all);
  std::vector<std::string> texts(n);
  for (std::size_t r = 0; r < n; ++r) {
    const char* begin = all.data() + r * send.size();
    texts[r].assign(begin, begin + lengths[r]);
  }
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
