# Optimizers: the common step, sharded steps and saved state (optimizer.cc, optimizer_state.cc,
# state_blob.*), SGD, Adam/AdamW, LAMB, LARS, the argument checks they share (param_checks.h),
# and the learning-rate schedules (include/ccl/training/optim.hpp).
list(APPEND part_sources optimizer.cc optimizer_state.cc state_blob.cc sgd.cc adam.cc lamb.cc
     lars.cc lr_schedule.cc param_checks.cc)
# LAMB's and Adam's √v̂ vectorize only where sqrt need not set errno (else each is a call behind a
# branch): a LAMB step runs 2.5x as fast (perf/training/lamb_bench).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/lamb.cc ${CMAKE_CURRENT_LIST_DIR}/adam.cc
                            PROPERTIES COMPILE_OPTIONS -fno-math-errno)
