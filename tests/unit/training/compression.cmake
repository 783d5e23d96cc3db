# Compressors with error feedback at 1, 2 and 4 ranks (threads of one process).
ccl_unit_test(training_compression_test SOURCES compression_test.cc LIBS ccl_training DEVSHM)
