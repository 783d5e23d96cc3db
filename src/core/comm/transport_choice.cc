#include "core/comm/transport_choice.h"

#include <algorithm>

#include "base/error.h"
#include "transport/network_transports.h"

namespace ccl {
namespace {

bool known_name(std::string_view name) {
  for (std::string_view n : transport::kNetworkTransportNames) {
    if (n == name) return true;
  }
  return false;
}

bool contains(std::span<const std::string> list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::vector<std::string> split_list(std::string_view text, std::string_view whole) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    for (char& c : item) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    if (item.empty()) {
      throw_error(cclInvalidUsage, "CCL_NET='%.*s': an empty item in the list",
                  static_cast<int>(whole.size()), whole.data());
    }
    if (!known_name(item)) {
      throw_error(cclInvalidUsage, "CCL_NET='%.*s': '%s' is not a network transport (ib, ucx, tcp)",
                  static_cast<int>(whole.size()), whole.data(), item.c_str());
    }
    if (contains(items, item)) {
      throw_error(cclInvalidUsage, "CCL_NET='%.*s': '%s' is named twice",
                  static_cast<int>(whole.size()), whole.data(), item.c_str());
    }
    items.push_back(item);
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

}  // namespace

NetPolicy parse_net_policy(std::string_view text) {
  NetPolicy policy;
  std::string_view body = text;
  while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
  if (body.empty()) return policy;
  if (body.front() == '^') {
    policy.excluded = split_list(body.substr(1), text);
    if (policy.excluded.size() == std::size(transport::kNetworkTransportNames)) {
      throw_error(cclInvalidUsage, "CCL_NET='%.*s' excludes every network transport",
                  static_cast<int>(text.size()), text.data());
    }
  } else {
    policy.named = split_list(body, text);
  }
  return policy;
}

std::vector<NetCandidate> probe_network_transports(const NetPolicy& policy) {
  std::vector<NetCandidate> candidates;
  for (const transport::NetworkTransport& t : transport::network_transports()) {
    if (policy.is_list() ? !contains(policy.named, t.name) : contains(policy.excluded, t.name)) {
      continue;
    }
    candidates.push_back({t.name, t.probe()});
  }
  return candidates;
}

std::vector<std::string> net_offer(const NetPolicy& policy,
                                   std::span<const NetCandidate> candidates) {
  auto find = [&](std::string_view name) -> const NetCandidate* {
    for (const NetCandidate& c : candidates) {
      if (c.name == name) return &c;
    }
    return nullptr;
  };
  std::vector<std::string> offer;
  if (policy.is_list()) {
    for (const std::string& name : policy.named) {
      const NetCandidate* c = find(name);
      if (c == nullptr) {
        throw_error(cclInvalidUsage,
                    "CCL_NET asks for %s, which this build of ccl does not have "
                    "(it was built without %s)",
                    name.c_str(), name == "ib" ? "libibverbs-dev's verbs.h" : "libucx-dev");
      }
      if (!c->availability.available) {
        throw_error(cclSystemError, "CCL_NET asks for %s, which cannot run here: %s", name.c_str(),
                    c->availability.detail.c_str());
      }
      offer.push_back(name);
    }
    return offer;
  }
  std::string reasons;
  for (const NetCandidate& c : candidates) {
    if (contains(policy.excluded, c.name)) continue;
    if (c.availability.available && c.availability.by_default) {
      offer.push_back(c.name);
    } else {
      reasons += "; " + c.name + ": " + c.availability.detail;
    }
  }
  if (offer.empty()) {
    throw_error(cclSystemError, "no network transport can run here%s", reasons.c_str());
  }
  return offer;
}

std::string pair_transport(std::span<const std::string> lower,
                           std::span<const std::string> higher) {
  for (const std::string& name : lower) {
    if (contains(higher, name)) return name;
  }
  return "";
}

std::string encode_offer(std::span<const std::string> offer) {
  std::string text;
  for (const std::string& name : offer) text += (text.empty() ? "" : ",") + name;
  return text;
}

std::vector<std::string> decode_offer(std::string_view text) {
  std::vector<std::string> offer;
  if (text.empty()) return offer;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    offer.emplace_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return offer;
    start = comma + 1;
  }
}

}  // namespace ccl
