# Every *_perf binary at 2, 3 and 4 ranks under cclrun, over shared memory and over tcp
# (CCL_SHM_DISABLE=1), with every datatype (and every op where it has ops) checked once (-c 1):
# a wrong element makes the binary exit with 1, a failed call with 2. Short sweeps (8 B .. 128 KiB
# by 8, two timed calls), so that all 42 runs together take a couple of minutes on two cores.
# Like tests/integration, each holds the "devshm" lock and checks that nothing is left in
# /dev/shm afterwards.
if(NOT TARGET cclrun)
  return()
endif()

set(CCL_PERF_RUN_ARGS -b 8 -e 128K -f 8 -n 2 -w 1 -c 1 -d all)
set(CCL_PERF_RUN_CLEAN ${PROJECT_SOURCE_DIR}/tests/integration/run_clean.sh)

foreach(coll ${CCL_PERF_COLLECTIVES})
  set(args ${CCL_PERF_RUN_ARGS})
  if(coll MATCHES "^(all_reduce|reduce|reduce_scatter)$")
    list(APPEND args -o all)
  endif()
  if(coll MATCHES "^(broadcast|reduce)$")
    list(APPEND args -r all)  # every root: non-roots are checked too
  endif()
  foreach(transport shm tcp)
    set(env_shm CCL_SHM_DISABLE=0)
    if(transport STREQUAL "tcp")
      set(env_shm CCL_SHM_DISABLE=1)
    endif()
    foreach(np 2 3 4)
      set(name perf.run.${coll}.${transport}.np${np})
      add_test(NAME ${name}
               COMMAND ${CCL_PERF_RUN_CLEAN} $<TARGET_FILE:cclrun> -np ${np}
                       $<TARGET_FILE:${coll}_perf> ${args})
      set_tests_properties(${name} PROPERTIES
        ENVIRONMENT "${env_shm};CCL_TIMEOUT=60" TIMEOUT 180 RESOURCE_LOCK devshm
        LABELS integration)
    endforeach()
  endforeach()
endforeach()
