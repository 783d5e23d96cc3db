# The DDP reducer at 1, 2 and 4 ranks (threads of one process).
ccl_unit_test(training_reducer_test SOURCES reducer_test.cc half_cast_test.cc LIBS ccl_training DEVSHM)
