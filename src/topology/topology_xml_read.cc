// Reading ccl's topology file (the format is described in topology_xml.h). Files are user input:
// every problem is an InvalidArgument naming the file and the line, never a crash.
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "base/error.h"
#include "topology/hwloc_discovery.h"
#include "topology/topology_xml.h"
#include "topology/xml_error_guard.h"

namespace ccl::topo {

namespace {

struct DocDeleter {
  void operator()(xmlDoc* doc) const { xmlFreeDoc(doc); }
};
using DocPtr = std::unique_ptr<xmlDoc, DocDeleter>;

// Well-formed XML, or InvalidArgument with libxml2's own account of what is wrong and where.
// The parser never reads the network or external entities, and prints nothing.
DocPtr parse_document(const std::string& text, const std::string& origin) {
  if (text.size() > INT_MAX) {
    throw_error(cclInvalidArgument, "%s:0: file too large", origin.c_str());
  }
  // libxml2's global state must be set up once before threads may parse at the same time.
  static std::once_flag init;
  std::call_once(init, xmlInitParser);
  std::unique_ptr<xmlParserCtxt, void (*)(xmlParserCtxt*)> ctxt(xmlNewParserCtxt(),
                                                                xmlFreeParserCtxt);
  if (!ctxt) throw_error(cclSystemError, "%s: out of memory", origin.c_str());
  const XmlGenericErrorGuard quiet(true);  // encoding errors would go to stderr despite NOERROR
  DocPtr doc(xmlCtxtReadMemory(
      ctxt.get(), text.data(), static_cast<int>(text.size()), origin.c_str(), nullptr,
      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_BIG_LINES));
  if (doc && xmlDocGetRootElement(doc.get()) == nullptr) doc.reset();  // cannot happen; cheap
  if (!doc) {
    const xmlError* err = xmlCtxtGetLastError(ctxt.get());
    std::string what = err != nullptr && err->message != nullptr ? err->message : "not XML";
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    throw_error(cclInvalidArgument, "%s:%d: %s", origin.c_str(), err != nullptr ? err->line : 0,
                what.c_str());
  }
  return doc;
}

std::string element_name(const xmlNode* e) { return reinterpret_cast<const char*>(e->name); }

class Reader {
 public:
  explicit Reader(const std::string& origin) : origin_(origin) {}

  Topology read(const xmlNode* root) {
    if (element_name(root) == "topology") {
      fail(root, "an hwloc XML file: load it from its file (CCL_TOPO_FILE, ccl-topo --file)");
    }
    if (element_name(root) != "ccl_topology") {
      fail(root, "root element is <%s>, expected <ccl_topology> (or hwloc's <topology>)",
           element_name(root).c_str());
    }
    bool has_version = false;
    for (const xmlAttr* a = root->properties; a != nullptr; a = a->next) {
      const std::string key = reinterpret_cast<const char*>(a->name);
      if (key != "version") fail(root, "unknown attribute '%s' on <ccl_topology>", key.c_str());
      if (value(a) != "1")
        fail(root, "unsupported version '%s' (this ccl reads 1)", value(a).c_str());
      has_version = true;
    }
    if (!has_version) fail(root, "<ccl_topology> has no version attribute");
    // The tree first, so that links may name any node wherever they stand.
    const xmlNode* machine = nullptr;
    for (const xmlNode* e : elements(root)) {
      if (element_name(e) == "link") continue;
      NodeType type;
      if (!parse_node_type(element_name(e), &type))
        fail(e, "unknown element <%s>", element_name(e).c_str());
      if (type != NodeType::Machine) fail(e, "<%s> outside <machine>", element_name(e).c_str());
      if (machine != nullptr) fail(e, "a second <machine>");
      machine = e;
    }
    if (machine == nullptr) fail(root, "no <machine> element");
    read_node(machine, -1, 0);
    for (const xmlNode* e : elements(root)) {
      if (element_name(e) == "link") read_link(e);
    }
    return std::move(topo_);
  }

 private:
  [[noreturn]] __attribute__((format(printf, 3, 4))) void fail(const xmlNode* at, const char* fmt,
                                                               ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    throw_error(cclInvalidArgument, "%s:%ld: %s", origin_.c_str(), xmlGetLineNo(at), what);
  }

  // The element children of `parent`; text other than white space is an error.
  std::vector<const xmlNode*> elements(const xmlNode* parent) {
    std::vector<const xmlNode*> out;
    for (const xmlNode* c = parent->children; c != nullptr; c = c->next) {
      if (c->type == XML_ELEMENT_NODE) {
        out.push_back(c);
      } else if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
        // Reported at the element holding it: libxml2 numbers a text node by its last line.
        std::string text = c->content != nullptr ? reinterpret_cast<const char*>(c->content) : "";
        const size_t first = text.find_first_not_of(" \t\r\n");
        if (first != std::string::npos) {
          fail(parent, "unexpected text '%.20s' in <%s>", text.c_str() + first,
               element_name(parent).c_str());
        }
      } else if (c->type == XML_ENTITY_REF_NODE) {
        fail(c, "unexpected entity reference");
      }  // comments and processing instructions carry nothing
    }
    return out;
  }

  std::string value(const xmlAttr* a) {
    xmlChar* v = xmlNodeListGetString(a->doc, a->children, 1);
    std::string s = v != nullptr ? reinterpret_cast<const char*>(v) : "";
    xmlFree(v);
    return s;
  }

  template <typename T>
  T parse_number(const xmlNode* e, const std::string& key, const std::string& text, T min, T max,
                 int base) {
    std::string_view digits = text;
    if (base == 16) {
      if (digits.size() < 3 || digits[0] != '0' || (digits[1] != 'x' && digits[1] != 'X')) {
        fail(e, "bad number '%s' for %s (expected 0x and hex digits)", text.c_str(), key.c_str());
      }
      digits.remove_prefix(2);
    }
    T v{};
    auto res = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
    if (digits.empty() || res.ec != std::errc() || res.ptr != digits.data() + digits.size() ||
        v < min || v > max) {
      fail(e, "bad number '%s' for %s", text.c_str(), key.c_str());
    }
    return v;
  }

  double parse_gbps(const xmlNode* e, const std::string& key, const std::string& text) {
    double v = 0;
    auto res = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || res.ec != std::errc() || res.ptr != text.data() + text.size() ||
        !std::isfinite(v) || v < 0) {
      fail(e, "bad number '%s' for %s", text.c_str(), key.c_str());
    }
    return v;
  }

  // "0-15,32-47": what the OS and hwloc print, checked so that a typo is caught here, not when
  // something binds to it.
  void check_cpuset(const xmlNode* e, const std::string& text) {
    std::istringstream items(text);
    std::string item;
    bool any = false;
    while (std::getline(items, item, ',')) {
      const size_t dash = item.find('-');
      const unsigned lo = parse_number<unsigned>(e, "cpuset", item.substr(0, dash), 0, INT_MAX, 10);
      if (dash != std::string::npos &&
          parse_number<unsigned>(e, "cpuset", item.substr(dash + 1), lo, INT_MAX, 10) < lo) {
        fail(e, "bad cpuset '%s'", text.c_str());
      }
      any = true;
    }
    if (!any || text.back() == ',') fail(e, "bad cpuset '%s'", text.c_str());
  }

  // "0000:17:00.0" for a PCI function, "0000:17" for a host bridge (domain of 4 to 8 hex digits).
  // The syntax is hwloc's pci_busid: the function is one hex digit, 0-f, as hwloc reads it from
  // its XML and as the converter (hwloc_discovery.cc) writes it. Real functions stop at 7, but a
  // file that hwloc loads must load again once ccl has saved it; ccl never reads the digits back
  // as numbers it relies on (canonical_pci_bus_id, for CUDA and NVML, refuses what is not real).
  void check_bus_id(const xmlNode* e, const std::string& text) {
    auto hex_run = [&](size_t at, size_t n) {
      for (size_t i = at; i < at + n; ++i) {
        if (i >= text.size() || !isxdigit(static_cast<unsigned char>(text[i]))) return false;
      }
      return true;
    };
    size_t domain = text.find(':');
    bool ok = domain != std::string::npos && domain >= 4 && domain <= 8 && hex_run(0, domain) &&
              hex_run(domain + 1, 2);
    const size_t rest = domain + 3;
    if (ok && text.size() != rest) {
      ok = text.size() == rest + 5 && text[rest] == ':' && hex_run(rest + 1, 2) &&
           text[rest + 3] == '.' && hex_run(rest + 4, 1);
    }
    if (!ok) fail(e, "bad bus_id '%s' (expected like 0000:17:00.0, or 0000:17)", text.c_str());
  }

  void read_node(const xmlNode* e, int parent, int depth) {
    // libxml2 stops at 256 levels already; a real tree has fewer than 10.
    if (depth > 64) fail(e, "elements nested too deep");
    NodeType type;
    if (!parse_node_type(element_name(e), &type)) {
      fail(e, "unknown element <%s>", element_name(e).c_str());
    }
    if (type == NodeType::Machine && parent >= 0) fail(e, "<machine> inside another node");
    std::string name;
    bool has_name = false;
    for (const xmlAttr* a = e->properties; a != nullptr; a = a->next) {
      if (reinterpret_cast<const char*>(a->name) == std::string("name")) {
        name = value(a);
        has_name = true;
      }
    }
    if (!has_name || name.empty()) fail(e, "<%s> without a name", element_name(e).c_str());
    if (topo_.find(name) >= 0 && parent >= 0) fail(e, "duplicate node name '%s'", name.c_str());
    int id = 0;
    if (parent < 0) {
      topo_.node(0).name = name;
    } else {
      id = topo_.add_node(type, parent, name);
    }
    for (const xmlAttr* a = e->properties; a != nullptr; a = a->next) {
      set_field(e, topo_.node(id), reinterpret_cast<const char*>(a->name), value(a));
    }
    for (const xmlNode* c : elements(e)) {
      if (element_name(c) == "link") fail(c, "<link> must be a child of <ccl_topology>");
      read_node(c, id, depth + 1);
    }
  }

  void set_field(const xmlNode* e, Node& n, const std::string& key, const std::string& v) {
    if (key == "name") {
      return;
    } else if (key == "hostname") {
      n.hostname = v;
    } else if (key == "os_index") {
      n.os_index = parse_number<int>(e, key, v, -1, INT_MAX, 10);
    } else if (key == "cpuset") {
      check_cpuset(e, v);
      n.cpuset = v;
    } else if (key == "memory_bytes") {
      n.memory_bytes = parse_number<uint64_t>(e, key, v, 0, UINT64_MAX, 10);
    } else if (key == "bus_id") {
      check_bus_id(e, v);
      n.bus_id = v;
    } else if (key == "vendor") {
      n.vendor = parse_number<uint16_t>(e, key, v, 0, UINT16_MAX, 16);
    } else if (key == "device") {
      n.device = parse_number<uint16_t>(e, key, v, 0, UINT16_MAX, 16);
    } else if (key == "pci_class") {
      n.pci_class = parse_number<uint32_t>(e, key, v, 0, UINT32_MAX, 16);
    } else if (key == "link_gbps") {
      n.link_gbps = parse_gbps(e, key, v);
    } else if (key == "os_devices") {
      n.os_devices.clear();
      std::istringstream items(v);
      std::string item;
      while (std::getline(items, item, ',')) {
        if (item.empty()) fail(e, "empty name in os_devices '%s'", v.c_str());
        n.os_devices.push_back(item);
      }
      if (n.os_devices.empty() || v.back() == ',') fail(e, "bad os_devices '%s'", v.c_str());
    } else {
      fail(e, "unknown attribute '%s' on <%s>", key.c_str(), element_name(e).c_str());
    }
  }

  void read_link(const xmlNode* e) {
    if (!elements(e).empty()) fail(e, "<link> has child elements");
    Link link;
    bool has_type = false;
    for (const xmlAttr* a = e->properties; a != nullptr; a = a->next) {
      const std::string key = reinterpret_cast<const char*>(a->name);
      const std::string v = value(a);
      if (key == "a" || key == "b") {
        const int id = topo_.find(v);
        if (id < 0) fail(e, "link to unknown node '%s'", v.c_str());
        (key == "a" ? link.a : link.b) = id;
      } else if (key == "type") {
        if (!parse_link_type(v, &link.type)) fail(e, "unknown link type '%s'", v.c_str());
        has_type = true;
      } else if (key == "count") {
        link.count = parse_number<int>(e, key, v, 1, INT_MAX, 10);
      } else if (key == "gbps") {
        link.gbps = parse_gbps(e, key, v);
      } else {
        fail(e, "unknown attribute '%s' on <link>", key.c_str());
      }
    }
    if (link.a < 0 || link.b < 0 || !has_type) fail(e, "<link> needs a, b and type");
    if (link.a == link.b) fail(e, "link from '%s' to itself", topo_.node(link.a).name.c_str());
    topo_.add_link(link);
  }

  const std::string& origin_;
  Topology topo_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(cclInvalidArgument, "%s: cannot open: %s", path.c_str(), strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw_error(cclInvalidArgument, "%s: cannot read", path.c_str());
  return text.str();
}

}  // namespace

Topology from_xml(const std::string& text, const std::string& origin) {
  DocPtr doc = parse_document(text, origin);
  return Reader(origin).read(xmlDocGetRootElement(doc.get()));
}

Topology load_topology_file(const std::string& path) {
  const std::string text = read_file(path);
  DocPtr doc = parse_document(text, path);
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (element_name(root) == "topology") {
    doc.reset();
    return load_hwloc_xml(path);
  }
  return Reader(path).read(root);
}

}  // namespace ccl::topo
