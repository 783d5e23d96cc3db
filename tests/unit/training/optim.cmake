# The optimizers and the learning-rate schedules (src/training/optim/): LAMB and LARS, SGD and
# Adam/AdamW against references, saved and loaded state.
ccl_unit_test(training_optim_test SOURCES optim_test.cc optim_sgd_adam_test.cc optim_state_test.cc
              LIBS ccl_training)
# Sharded steps (ZeRO's pieces) at 2, 3 and 4 ranks (threads of one process).
ccl_unit_test(training_optim_sharded_test SOURCES optim_sharded_test.cc LIBS ccl_training DEVSHM)
