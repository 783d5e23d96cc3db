# DDP: bucket assignment (torch's rule) and the reducer.
list(APPEND part_sources buckets.cc reducer.cc half_cast.cc)
