# LAMB, LARS and the learning-rate schedules (src/training/optim/).
ccl_unit_test(training_optim_test SOURCES optim_test.cc LIBS ccl_training)
