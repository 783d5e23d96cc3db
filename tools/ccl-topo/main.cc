// ccl-topo: the machine as ccl sees it (like `nvidia-smi topo -m` and lstopo, for ccl's view):
// the containment tree, the NVLink/SMP links, the path classes between the devices ranks sit on
// and the NICs, and the ring and tree orders ccl derives from them.
//
// Without --file it shows system_topology(), what the library itself uses: so CCL_TOPO_FILE
// works here too, and a file saved with --xml (or CCL_TOPO_DUMP_FILE) can be studied anywhere.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "net_view.h"
#include "topology/render.h"
#include "topology/topology_xml.h"

namespace {

const char* usage_text() {
  return "usage: ccl-topo [--file FILE] [--xml | --dot] [--net] [--pairs] [--help]\n"
         "\n"
         "Prints this machine's topology as ccl sees it: the tree, the NVLink and SMP links, the\n"
         "path classes between GPUs (else NUMA nodes) and NICs, and the ring and tree orders.\n"
         "\n"
         "  --file FILE  read FILE (ccl's XML, or hwloc's from lstopo --of xml) instead of the\n"
         "               topology the library uses (CCL_TOPO_FILE, else discovery)\n"
         "  --xml        print the topology in ccl's XML format (for CCL_TOPO_FILE)\n"
         "  --dot        print a graphviz digraph (ccl-topo --dot | dot -Tsvg > topo.svg)\n"
         "  --net        print the network transports this host offers its peers on other\n"
         "               hosts (ib, ucx, tcp: each one's state, CCL_NET applied)\n"
         "  --pairs      under a launcher (cclrun, mpirun, srun, torchrun): make a communicator\n"
         "               of its ranks and print, on rank 0, the transport of every pair\n"
         "  -h, --help   print this text\n"
         "\n"
         "Exit status: 0; 1 if the topology cannot be read; 2 on bad usage.\n";
}

int usage_error(const char* what) {
  fprintf(stderr, "ccl-topo: %s\n%s", what, usage_text());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  bool has_file = false;
  bool xml = false;
  bool dot = false;
  bool net = false;
  bool pairs = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      fputs(usage_text(), stdout);
      return 0;
    } else if (arg == "--xml") {
      xml = true;
    } else if (arg == "--dot") {
      dot = true;
    } else if (arg == "--net") {
      net = true;
    } else if (arg == "--pairs") {
      pairs = true;
    } else if (arg == "--file" || arg.rfind("--file=", 0) == 0) {
      if (has_file) return usage_error("--file given twice");
      if (arg == "--file") {
        if (i + 1 >= argc) return usage_error("--file needs a file name");
        file = argv[++i];
      } else {
        file = arg.substr(strlen("--file="));
      }
      if (file.empty()) return usage_error("--file needs a file name");
      has_file = true;
    } else {
      return usage_error(("unknown argument '" + arg + "'").c_str());
    }
  }
  if (xml && dot) return usage_error("--xml and --dot exclude each other");
  if ((net || pairs) && (xml || dot || has_file)) {
    return usage_error("--net and --pairs go without --file, --xml and --dot");
  }
  if (pairs) return ccl::topo_tool::print_pair_transports();
  if (net) {
    fputs(ccl::topo_tool::render_network_transports().c_str(), stdout);
    return fflush(stdout) == 0 ? 0 : 1;
  }

  try {
    ccl::topo::Topology loaded;
    if (has_file) loaded = ccl::topo::load_topology_file(file);
    const ccl::topo::Topology& topo = has_file ? loaded : ccl::topo::system_topology();
    const std::string text = xml   ? ccl::topo::to_xml(topo)
                             : dot ? ccl::topo::render_dot(topo)
                                   : ccl::topo::render_text(topo);
    fputs(text.c_str(), stdout);
  } catch (const std::exception& e) {
    fprintf(stderr, "ccl-topo: %s\n", e.what());
    return 1;
  }
  if (fflush(stdout) != 0) {
    fprintf(stderr, "ccl-topo: cannot write the output\n");
    return 1;
  }
  return 0;
}
