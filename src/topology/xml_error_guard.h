// libxml2 reports some errors (undecodable input encodings, I/O) through the calling thread's
// "generic" error handler even when a parse asks for XML_PARSE_NOERROR. The guard puts that handler
// back as it found it, optionally silencing it meanwhile (the topology readers print nothing and
// report through exceptions).
//
// Why restoring matters: hwloc's libxml2 plugin (hwloc_xml_libxml.so) installs a handler of its own
// the first time it reads XML after being loaded, and hwloc unloads the plugin with its last
// topology. The handler then points into unmapped memory and libxml2's next generic error jumps
// there (found by tests/fuzz/topology_file_fuzz: an hwloc XML file, then a file with an unknown
// encoding, crashed the process).
#pragma once

#include <libxml/parser.h>
#include <libxml/xmlerror.h>

namespace ccl::topo {

class XmlGenericErrorGuard {
 public:
  explicit XmlGenericErrorGuard(bool silence)
      : handler_(xmlGenericError), context_(xmlGenericErrorContext) {
    if (silence) xmlSetGenericErrorFunc(nullptr, &ignore);
  }
  ~XmlGenericErrorGuard() { xmlSetGenericErrorFunc(context_, handler_); }
  XmlGenericErrorGuard(const XmlGenericErrorGuard&) = delete;
  XmlGenericErrorGuard& operator=(const XmlGenericErrorGuard&) = delete;

 private:
  static void ignore(void*, const char*, ...) {}

  xmlGenericErrorFunc handler_;
  void* context_;
};

}  // namespace ccl::topo
