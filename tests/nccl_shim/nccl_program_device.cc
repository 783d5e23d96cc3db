// nccl_program's check of the host calls of NCCL's device API (nccl_device/core.h, which C cannot
// include): ncclCommQueryProperties says that ccl has no device API, no multimem and no
// GPU-initiated networking; ncclDevCommCreate and the window pointers are refused. Returns 1, or 0
// with the reason in `why`.
#include <nccl.h>
#include <nccl_device/core.h>

#include <cstdio>
#include <cstring>

extern "C" int check_device_api(ncclComm_t comm, int rank, int nranks, char* why, size_t size) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
#pragma GCC diagnostic pop
  if (ncclCommQueryProperties(comm, &props) != ncclSuccess) {
    std::snprintf(why, size, "ncclCommQueryProperties: %s", ncclGetLastError(comm));
    return 0;
  }
  if (props.rank != rank || props.nRanks != nranks || props.deviceApiSupport ||
      props.multimemSupport || props.hostRmaSupport || props.ginType != NCCL_GIN_TYPE_NONE) {
    std::snprintf(why, size,
                  "ncclCommQueryProperties: rank %d of %d, device API %d, multimem %d, host RMA %d",
                  props.rank, props.nRanks, int(props.deviceApiSupport), int(props.multimemSupport),
                  int(props.hostRmaSupport));
    return 0;
  }
  ncclCommProperties_t unset;
  std::memset(&unset, 0, sizeof(unset));
  if (ncclCommQueryProperties(comm, &unset) != ncclInvalidArgument) {
    std::snprintf(why, size, "ncclCommQueryProperties took properties not made by the initializer");
    return 0;
  }
  ncclDevComm_t* dev_comm = nullptr;  // opaque: never made
  if (ncclDevCommCreate(comm, nullptr, dev_comm) != ncclInvalidUsage ||
      std::strstr(ncclGetLastError(comm), "device API") == nullptr) {
    std::snprintf(why, size, "ncclDevCommCreate: not refused naming the device API: %s",
                  ncclGetLastError(comm));
    return 0;
  }
  void* ptr = &props;
  if (ncclGetPeerDevicePointer(nullptr, 0, 0, &ptr) != ncclInvalidUsage || ptr != nullptr ||
      ncclGetLsaMultimemDevicePointer(nullptr, 0, &ptr) != ncclInvalidUsage ||
      ncclDevCommDestroy(comm, nullptr) != ncclInvalidUsage) {
    std::snprintf(why, size, "the device API's window pointers or destroy were not refused");
    return 0;
  }
  return 1;
}
