#include "cuda/cuda_devices.h"

#include "cuda/cuda_driver.h"

#if CCL_HAVE_CUDA_H
#include "cuda/cuda_driver_api.h"
#endif

namespace ccl::cuda {

std::vector<std::string> device_pci_bus_ids() {
  std::vector<std::string> ids;
#if CCL_HAVE_CUDA_H
  const DriverApi* api = cuda_driver();
  if (api == nullptr) return ids;
  int count = 0;
  if (api->device_get_count(&count) != CUDA_SUCCESS) return ids;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    // 13 characters and the terminator are enough ("0000:3B:00.0"); the driver may write a
    // longer domain, so leave room.
    char bus_id[64] = "";
    if (api->device_get(&device, ordinal) != CUDA_SUCCESS ||
        api->device_get_pci_bus_id(bus_id, sizeof(bus_id), device) != CUDA_SUCCESS) {
      bus_id[0] = '\0';
    }
    ids.emplace_back(bus_id);
  }
#endif
  return ids;
}

}  // namespace ccl::cuda
