# Pipeline parallelism: the schedules (GPipe, 1F1B, interleaved), their bubbles, the runner.
list(APPEND part_sources schedule.cc bubble.cc runner.cc)
