# ZeRO (stages 1-3): the layout of units and shards (pure), the engine on a ccl stream, and the
# checkpoint of the sharded state.
list(APPEND part_sources layout.cc zero.cc checkpoint.cc)
