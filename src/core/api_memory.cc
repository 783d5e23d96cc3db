// cclMemAlloc / cclMemFree: registered host memory (transport/shm/registered_memory.h).
#include "core/api_guard.h"
#include "base/error.h"
#include "transport/shm/registered_memory.h"

using namespace ccl;

extern "C" {

cclResult_t cclMemAlloc(void** ptr, size_t size) {
  return guarded(kNoComm, "cclMemAlloc", [&] {
    if (ptr == nullptr) throw_error(cclInvalidArgument, "cclMemAlloc: ptr is NULL");
    *ptr = nullptr;
    *ptr = transport::shm::registered_alloc(size);
  });
}

cclResult_t cclMemFree(void* ptr) {
  return guarded(kNoComm, "cclMemFree", [&] {
    if (ptr == nullptr) throw_error(cclInvalidArgument, "cclMemFree: ptr is NULL");
    transport::shm::registered_free(ptr);
  });
}

}  // extern "C"
