# Pipeline schedules, bubbles and the runner (2 and 4 ranks as threads of one process).
ccl_unit_test(training_pipeline_test SOURCES pipeline_schedule_test.cc pipeline_runner_test.cc
              LIBS ccl_training DEVSHM)
