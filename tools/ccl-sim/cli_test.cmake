# ccl-sim's command line:
#   cmake -DCCL_SIM=<ccl-sim> -DDATA_DIR=<tests/data> -DOUT_DIR=<dir> -P cli_test.cmake
# Bad usage, the nccl-tests rows with the pick first, a machine file, the same JSON twice, and
# --explain's critical path.

function(fail)
  message(FATAL_ERROR "ccl-sim CLI test: ${ARGV}")
endfunction()

function(run_sim)
  execute_process(COMMAND ${CCL_SIM} ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE o
                  ERROR_VARIABLE e TIMEOUT 60)
  set(status "${rc}" PARENT_SCOPE)
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
endfunction()

foreach(bad --bogus "--collective;bogus" "--fabric;mesh" "-b;1M;-e;8" "--ranks;0" "--oversub;0.5"
        "--max-ops;0" "--calls;0")
  run_sim(${bad})
  if(NOT status EQUAL 2 OR NOT err MATCHES "usage: ccl-sim")
    fail("'${bad}': status ${status}, stderr '${err}'")
  endif()
endforeach()

# Every size has the tuner's pick first ('*'), then the other candidates; nccl-tests' footer.
run_sim(--ranks 4 -b 8 -e 1M -f 32 --figures default)
if(NOT status EQUAL 0 OR NOT out MATCHES "Avg bus bandwidth")
  fail("4 ranks: status ${status}, '${out}' '${err}'")
endif()
string(REGEX MATCHALL "\n +[0-9]+ +[0-9]+ +float[^\n]*" rows "${out}")
list(LENGTH rows nrows)
if(nrows LESS 8)
  fail("4 ranks: ${nrows} rows in '${out}'")
endif()
list(GET rows 0 first)
if(NOT first MATCHES " \\* |\\*$")
  fail("the first row is not the pick: '${first}'")
endif()

# Two nodes of a DGX H100 machine file: NVLink inside, the net between.
run_sim(--topo ${DATA_DIR}/dgx_h100.xml --nodes 2 --collective allgather -b 1K -e 1M -f 32
        --figures default --pick-only)
if(NOT status EQUAL 0 OR NOT out MATCHES "nvlink")
  fail("dgx_h100: status ${status}, '${out}' '${err}'")
endif()

# The same run twice writes the same JSON.
foreach(i 1 2)
  run_sim(--nodes 4 --per-node 4 --fabric fat-tree --nodes-per-leaf 2 --oversub 2 -b 8 -e 4M
          -f 16 --figures default --json ${OUT_DIR}/sim${i}.json)
  if(NOT status EQUAL 0)
    fail("json run ${i}: status ${status}, '${err}'")
  endif()
endforeach()
file(READ ${OUT_DIR}/sim1.json a)
file(READ ${OUT_DIR}/sim2.json b)
if(NOT a STREQUAL b OR NOT a MATCHES "\"program\": \"ccl-sim\"")
  fail("the JSON differs between two runs, or is not ccl-sim's")
endif()

# --explain: the critical path of the pick at the largest size, which link held it, and which
# rank ends it, after the rows (every line a comment).
run_sim(--nodes 2 --per-node 2 -b 1K -e 1M -f 1024 --figures default --pick-only
        --algo allreduce:ring --explain)
if(NOT status EQUAL 0 OR NOT out MATCHES "# --explain: ring/[A-Za-z]+, 1048576 bytes"
   OR NOT out MATCHES "# critical path: [0-9]+ steps, ends on rank [0-9]"
   OR NOT out MATCHES "send [0-9]+ KiB to rank [0-9] over net"
   OR NOT out MATCHES "bytes held by nic tx")
  fail("--explain: status ${status}, '${out}' '${err}'")
endif()

# --max-ops: a run above it gets the cost model's time, and says so.
run_sim(--nodes 4 --per-node 4 -b 4M -e 4M --figures default --pick-only --algo allreduce:tree
        --max-ops 10)
if(NOT status EQUAL 0 OR NOT out MATCHES
   "tree/[A-Za-z]+ \\* \\(cost model: over 10 steps by rank [0-9]+ of 16, not symmetric, too large")
  fail("--max-ops: status ${status}, '${out}' '${err}'")
endif()
