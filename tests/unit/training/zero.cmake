# ZeRO (src/training/zero/): the layout of units, slices and pieces (pure, every size), and the
# engine at 1 to 4 ranks (threads) against plain DDP on the same steps for each stage, optimizer
# and precision, memory, prefetch, checkpoint, misuse.
ccl_unit_test(training_zero_test SOURCES zero_layout_test.cc zero_engine_test.cc
              zero_checkpoint_test.cc LIBS ccl_training DEVSHM)
