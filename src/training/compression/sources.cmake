# Compression with error feedback: the shared loop, TopK, scaled sign, 1-bit Adam's allreduce.
list(APPEND part_sources compressor.cc sign_bits.cc topk.cc scaled_sign.cc onebit.cc)
