// ccl's topology file (DESIGN.md principle 3): one machine's Topology as XML, so that a DGX-class
// machine can be saved where it runs and studied anywhere (CCL_TOPO_FILE, ccl-topo --file).
//
// The format, version 1 (tests/data/*.xml are examples):
//   <?xml version="1.0" encoding="UTF-8"?>
//   <ccl_topology version="1">
//     <machine name="machine" hostname="dgx" memory_bytes="2199023255552">
//       <package name="package0" os_index="0" cpuset="0-55,112-167">
//         <numa name="numa0" os_index="0" cpuset="0-55,112-167" memory_bytes="1099511627776">
//           <core name="core0" os_index="0" cpuset="0,112"/>
//         </numa>
//         <hostbridge name="hostbridge0" bus_id="0000:15">
//           <pciswitch name="pciswitch0" bus_id="0000:16:00.0" link_gbps="64">
//             <gpu name="gpu0" os_index="0" bus_id="0000:18:00.0" vendor="0x10de" ...
//     </machine>
//     <link a="gpu0" b="nvswitch0" type="nvlink" count="5" gbps="100"/>
//   </ccl_topology>
// Elements are the node types of topology.h (node_type_name), nested as the containment tree;
// their attributes are the Node fields of the same name (memory_bytes decimal; vendor, device and
// pci_class hexadecimal with 0x; os_devices a comma-separated list); a missing attribute is the
// field's default. `name` is required and unique. <link> elements (children of the root) name
// their two nodes; count defaults to 1, gbps to 0. Comments are allowed and dropped.
//
// Node ids are given in document order (depth first), which is the order to_xml writes. So
// from_xml(to_xml(t)) equals t exactly when t's ids are depth-first (files, discovery); otherwise
// the ids are renumbered and everything else (names, fields, tree, links) is kept. to_xml writes
// the canonical text: a file in that form is reproduced byte for byte.
#pragma once

#include <string>

#include "topology/topology.h"

namespace ccl::topo {

// ccl's format. InvalidArgument for a string the format cannot hold (control characters; a comma
// in an OS device name).
std::string to_xml(const Topology& topo);
// Parses ccl's format; `origin` (a file name) starts every error message:
// InvalidArgument "<origin>:<line>: <what>" for malformed XML, a wrong root or version, an
// unknown element or attribute, a bad number, a duplicate name or a link to an unknown node.
Topology from_xml(const std::string& text, const std::string& origin);

// ccl's XML or hwloc's (`lstopo --of xml`, root element <topology>: load_hwloc_xml), told apart by
// the root element. InvalidArgument naming the file (and the line) on any error.
Topology load_topology_file(const std::string& path);
// Writes to_xml(topo) to `path`; SystemError if it cannot be written.
void save_topology_file(const Topology& topo, const std::string& path);

// The topology the library uses: CCL_TOPO_FILE if set, else discover_local(); written to
// CCL_TOPO_DUMP_FILE when that is set (a failure to write it is a warning). Computed once per
// process (thread-safe); if computing it throws, the next call tries again.
const Topology& system_topology();

}  // namespace ccl::topo
