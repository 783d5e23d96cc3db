# Optimizers: LAMB, LARS, the argument checks they share (param_checks.h), and the learning-rate
# schedules (include/ccl/training/optim.hpp).
list(APPEND part_sources lamb.cc lars.cc lr_schedule.cc param_checks.cc)
# LAMB's √v̂ vectorizes only where sqrt need not set errno (else each is a call behind a branch):
# a step runs 2.5x as fast (perf/training/lamb_bench).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/lamb.cc
                            PROPERTIES COMPILE_OPTIONS -fno-math-errno)
