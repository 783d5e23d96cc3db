# Tensor parallelism (src/training/tp/): the f/g and sequence operators, column -> row MLP block
# and vocabulary-parallel embedding at tp 1, 2 and 4 (ranks as threads) against the unsplit
# computation in one thread, and the refusals of bad shapes.
ccl_unit_test(training_tp_test SOURCES tp_ops_test.cc tp_mlp_test.cc tp_embedding_test.cc
              tp_errors_test.cc LIBS ccl_training DEVSHM)
