# The device mesh: placement (pure), its description (pure), the exchange of places and the
# DeviceMesh that splits the world communicator into tp, pp and dp groups.
list(APPEND part_sources placement.cc describe.cc text_exchange.cc device_mesh.cc)
