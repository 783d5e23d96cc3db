// Topology files as CCL_TOPO_FILE and ccl-topo --file load them (topology/topology_xml.h,
// load_topology_file): ccl's format or hwloc's XML (`lstopo --of xml`), told apart by the root
// element. hwloc reads only from a path, so each input is written to a memfd first.
// topology_xml_fuzz covers ccl's format in depth; the seeds here are mostly hwloc exports.
#include <cstring>

#include "base/error.h"
#include "fuzz_check.h"
#include "topology/hwloc_discovery.h"
#include "topology/topology_xml.h"

using namespace ccl;

// hwloc 2.9 leaks the object it is importing (with its bitmaps) when something inside it is
// rejected, e.g. an <info> without a name (corpus/topology_file/hwloc_leak_bad_info.xml): a bug of
// hwloc's error path, a few hundred bytes per rejected file, which ccl cannot free. Suppressing
// the leaked object also hides what hangs from it, and nothing else.
extern "C" const char* __lsan_default_suppressions() { return "leak:hwloc_alloc_setup_object\n"; }

// hwloc loads its plugins with its first topology and unloads them with its last; doing that for
// every input made this target ~20 times slower. current_numa_os_index() keeps a topology for the
// life of the process. (Unloading is tested by topology_discovery_test XmlErrorAfterAnHwlocFile.)
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  topo::current_numa_os_index();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::InputFile file("topology.xml");
  file.write(data, size);
  topo::Topology t;
  try {
    t = topo::load_topology_file(file.path());
  } catch (const Error& e) {
    FUZZ_CHECK(e.code() == cclInvalidArgument);
    FUZZ_CHECK(std::strstr(e.what(), file.path().c_str()) != nullptr);  // errors name the file
    return 0;
  }
  // A loaded topology can be saved in ccl's format (ccl-topo, CCL_TOPO_DUMP_FILE) and read back.
  const std::string canonical = topo::to_xml(t);
  FUZZ_CHECK(topo::to_xml(topo::from_xml(canonical, "canonical.xml")) == canonical);
  return 0;
}
