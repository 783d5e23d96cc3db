#include "core/tuning/algo_selection.h"

#include <strings.h>

#include <vector>

#include "base/error.h"

namespace ccl::tune {

namespace {

using Mask = Selection::Mask;
static_assert(kNumAlgorithms <= 16 && kNumProtocols <= 16, "a Mask holds a bit per name");

constexpr const char* kCollectiveNames[kNumCollectives] = {
    "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "barrier"};
constexpr const char* kAlgorithmNames[kNumAlgorithms] = {
    "direct",       "ring",         "tree",     "recursive_doubling",
    "rabenseifner", "hierarchical", "pairwise", "dissemination"};
constexpr const char* kProtocolNames[kNumProtocols] = {"LL", "LL128", "Simple"};

// Index of `text` in `names` (case-insensitive), or -1.
int find_name(std::string_view text, const char* const* names, int count) {
  for (int i = 0; i < count; ++i) {
    const std::string_view name = names[i];
    if (text.size() == name.size() && strncasecmp(text.data(), name.data(), text.size()) == 0) {
      return i;
    }
  }
  return -1;
}

std::string join(const char* const* names, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (i != 0) out += ", ";
    out += names[i];
  }
  return out;
}

std::string_view trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

// One variable's vocabulary: CCL_ALGO's algorithms or CCL_PROTO's protocols.
struct Vocabulary {
  const char* variable;
  const char* what;  // "algorithm", "protocol"
  const char* const* names;
  int count;
  Mask all() const { return static_cast<Mask>((1u << count) - 1); }
};

class Parser {
 public:
  Parser(const Vocabulary& vocabulary, const std::string& value) : v_(vocabulary), value_(value) {}

  // Fills masks[c] with the set allowed for collective c.
  void run(std::array<Mask, kNumCollectives>* masks) const {
    masks->fill(v_.all());
    bool named[kNumCollectives] = {};
    bool have_default = false, first = true;
    Mask default_mask = v_.all();
    for (std::string_view entry : split(value_, ';')) {
      entry = trim(entry);
      if (entry.empty()) continue;  // a trailing or doubled ';'
      const size_t colon = entry.find(':');
      if (colon == std::string_view::npos) {
        // NCCL: only the first entry may leave out the collective; it then covers the
        // collectives no other entry names.
        if (!first) {
          fail("'" + std::string(entry) +
               "' has no 'collective:' prefix; only the first entry may leave it out");
        }
        have_default = true;
        default_mask = parse_list(entry);
      } else {
        const std::string_view name = trim(entry.substr(0, colon));
        const int c = find_name(name, kCollectiveNames, kNumCollectives);
        if (c < 0) {
          fail_name("collective", name, join(kCollectiveNames, kNumCollectives));
        }
        if (named[c]) fail("collective '" + std::string(name) + "' is named twice");
        named[c] = true;
        (*masks)[c] = parse_list(entry.substr(colon + 1));
      }
      first = false;
    }
    if (have_default) {
      for (int c = 0; c < kNumCollectives; ++c) {
        if (!named[c]) (*masks)[c] = default_mask;
      }
    }
  }

 private:
  // "a,b,c" or "^a,b": the set allowed.
  Mask parse_list(std::string_view list) const {
    list = trim(list);
    const bool exclude = !list.empty() && list.front() == '^';
    if (exclude) list.remove_prefix(1);
    Mask mask = 0;
    for (std::string_view token : split(list, ',')) {
      token = trim(token);
      if (token.empty()) {
        fail("empty " + std::string(v_.what) + " name (valid: " + join(v_.names, v_.count) + ")");
      }
      const int i = find_name(token, v_.names, v_.count);
      if (i < 0) fail_name(v_.what, token, join(v_.names, v_.count));
      mask = static_cast<Mask>(mask | (1u << i));
    }
    return exclude ? static_cast<Mask>(v_.all() & ~mask) : mask;
  }

  [[noreturn]] void fail_name(const char* what, std::string_view token,
                              const std::string& valid) const {
    fail("unknown " + std::string(what) + " '" + std::string(token) + "' (valid: " + valid + ")");
  }
  [[noreturn]] void fail(const std::string& detail) const {
    throw_error(cclInvalidUsage, "%s=\"%s\": %s", v_.variable, value_.c_str(), detail.c_str());
  }

  const Vocabulary& v_;
  const std::string& value_;
};

const Vocabulary kAlgoVocabulary{"CCL_ALGO", "algorithm", kAlgorithmNames, kNumAlgorithms};
const Vocabulary kProtoVocabulary{"CCL_PROTO", "protocol", kProtocolNames, kNumProtocols};

}  // namespace

const char* collective_name(Collective collective) {
  const auto i = static_cast<size_t>(collective);
  return i < kNumCollectives ? kCollectiveNames[i] : "?";
}

const char* algorithm_name(Algorithm algorithm) {
  const auto i = static_cast<size_t>(algorithm);
  return i < kNumAlgorithms ? kAlgorithmNames[i] : "?";
}

const char* protocol_name(Protocol protocol) {
  const auto i = static_cast<size_t>(protocol);
  return i < kNumProtocols ? kProtocolNames[i] : "?";
}

bool parse_collective(std::string_view text, Collective* out) {
  const int i = find_name(trim(text), kCollectiveNames, kNumCollectives);
  if (i >= 0) *out = static_cast<Collective>(i);
  return i >= 0;
}

bool parse_algorithm(std::string_view text, Algorithm* out) {
  const int i = find_name(trim(text), kAlgorithmNames, kNumAlgorithms);
  if (i >= 0) *out = static_cast<Algorithm>(i);
  return i >= 0;
}

bool parse_protocol(std::string_view text, Protocol* out) {
  const int i = find_name(trim(text), kProtocolNames, kNumProtocols);
  if (i >= 0) *out = static_cast<Protocol>(i);
  return i >= 0;
}

Selection::Selection() {
  algorithms_.fill(kAlgoVocabulary.all());
  protocols_.fill(kProtoVocabulary.all());
}

Selection Selection::parse(const std::string& algo_env, const std::string& proto_env) {
  Selection selection;
  Parser(kAlgoVocabulary, algo_env).run(&selection.algorithms_);
  Parser(kProtoVocabulary, proto_env).run(&selection.protocols_);
  return selection;
}

}  // namespace ccl::tune
