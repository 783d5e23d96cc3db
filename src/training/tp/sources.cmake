# Tensor parallelism (Megatron-style): shape checks, the dense kernels of one rank, the f/g and
# sequence-parallel operators, shards, column- and row-parallel linear, vocabulary-parallel
# embedding.
list(APPEND part_sources tp_checks.cc dense.cc region_ops.cc shard.cc column_parallel.cc
     row_parallel.cc vocab_embedding.cc)
