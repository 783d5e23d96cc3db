# ccl-topo's command line:
#   cmake -DCCL_TOPO=<ccl-topo> -DDATA_DIR=<tests/data> -P cli_test.cmake
# Usage and errors, CCL_TOPO_FILE, --dot, and the live machine (whatever it is: only the shape of
# the output is checked there).

function(fail)
  message(FATAL_ERROR "ccl-topo CLI test: ${ARGV}")
endfunction()

# Runs ccl-topo with the given arguments (CCL_TOPO_FILE unset); sets status, out, err.
function(run_topo)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=CCL_TOPO_FILE --unset=CCL_DEBUG
                          ${CCL_TOPO} ${ARGV}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 30)
  set(status "${rc}" PARENT_SCOPE)
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
endfunction()

run_topo(--help)
if(NOT status EQUAL 0 OR NOT out MATCHES "^usage: ccl-topo")
  fail("--help: status ${status}, printed '${out}'")
endif()

# Bad usage: status 2, the usage on stderr, nothing on stdout.
foreach(bad --bogus "--xml;--dot" --file "--file=" extra "--file;a;--file;b")
  run_topo(${bad})
  if(NOT status EQUAL 2 OR NOT err MATCHES "usage: ccl-topo" OR NOT out STREQUAL "")
    fail("'${bad}': status ${status}, stdout '${out}', stderr '${err}'")
  endif()
endforeach()

# A file that cannot be read: status 1, the file (and line) named on stderr.
run_topo(--file /nonexistent/topo.xml)
if(NOT status EQUAL 1 OR NOT err MATCHES "/nonexistent/topo.xml" OR NOT out STREQUAL "")
  fail("missing file: status ${status}, stdout '${out}', stderr '${err}'")
endif()
set(broken ${CMAKE_CURRENT_BINARY_DIR}/ccl_topo_cli_broken.xml)
file(WRITE ${broken} "<ccl_topology version=\"1\">\n<machine name=\"m\">\n"
                     "<gpu name=\"g\" vendor=\"x\"/>\n</machine>\n</ccl_topology>\n")
run_topo(--file ${broken})
file(REMOVE ${broken})
if(NOT status EQUAL 1 OR NOT err MATCHES "ccl_topo_cli_broken.xml:3: bad number 'x' for vendor")
  fail("broken file: status ${status}, stderr '${err}'")
endif()

# CCL_TOPO_FILE is what the library would use, so ccl-topo shows it.
run_topo(--file ${DATA_DIR}/vm.xml)
set(from_flag "${out}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env CCL_TOPO_FILE=${DATA_DIR}/vm.xml ${CCL_TOPO}
                RESULT_VARIABLE status OUTPUT_VARIABLE out TIMEOUT 30)
if(NOT status EQUAL 0 OR NOT out STREQUAL from_flag OR NOT out MATCHES "^machine  host vm")
  fail("CCL_TOPO_FILE: status ${status}, printed '${out}'")
endif()

# --dot: a digraph with the tree edges and the links.
run_topo(--file=${DATA_DIR}/dgx_h100.xml --dot)
foreach(want "^digraph \"dgx-h100\" {\n" "\n  \"pciswitch0\" -> \"gpu0\" \\[label=\"64 GB/s\"\\];\n"
        "\n  \"gpu0\" -> \"nvswitch0\" \\[dir=none, color=green, label=\"nvlink x5  100 GB/s\"\\];\n"
        "\n}\n$")
  if(NOT status EQUAL 0 OR NOT out MATCHES "${want}")
    fail("--dot: status ${status}, no '${want}' in '${out}'")
  endif()
endforeach()

# This machine: a tree whose first line is the machine and its host name, then the sections.
cmake_host_system_information(RESULT host QUERY HOSTNAME)
run_topo()
string(REGEX MATCH "^[^\n]*" first_line "${out}")
string(FIND "${first_line}" "host ${host}" host_at)
if(NOT status EQUAL 0 OR NOT first_line MATCHES "^machine  " OR host_at LESS 0)
  fail("live machine: status ${status}, first line '${first_line}' does not name host '${host}': ${err}")
endif()
foreach(want "\nlinks:" "\npaths:\n" "\nring order: " "\ntree order: ")
  string(FIND "${out}" "${want}" at)
  if(at LESS 0)
    fail("live machine: no '${want}' in '${out}'")
  endif()
endforeach()

# --net: every network transport this build has, tcp usable (an interface or loopback is up), the
# offer; a CCL_NET that cannot be met is reported as the failure init would give, status 0.
run_topo(--net)
if(NOT status EQUAL 0 OR NOT out MATCHES "^Network transports \\(between hosts; CCL_NET=unset\\):\n"
   OR NOT out MATCHES "\n  tcp  usable " OR NOT out MATCHES "\nOffered to peers on other hosts, in order: [a-z,]*tcp\n")
  fail("--net: status ${status}, printed '${out}' '${err}'")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env CCL_NET=tcp,bogus ${CCL_TOPO} --net
                RESULT_VARIABLE status OUTPUT_VARIABLE out TIMEOUT 30)
if(NOT status EQUAL 0 OR NOT out MATCHES "Init would fail: CCL_NET='tcp,bogus': 'bogus' is not a network transport")
  fail("--net with a bad CCL_NET: status ${status}, printed '${out}'")
endif()
foreach(bad "--net;--xml" "--pairs;--file=x")
  run_topo(${bad})
  if(NOT status EQUAL 2 OR NOT err MATCHES "--net and --pairs go without")
    fail("'${bad}': status ${status}, stderr '${err}'")
  endif()
endforeach()
