// cclMemAlloc / cclMemFree: registered host memory (transport/shm/registered_memory.h);
// cclCommRegister / cclCommDeregister: the communicator's registration cache
// (core/registration/registration_cache.h).
#include "base/error.h"
#include "core/api/api_guard.h"
#include "core/comm/comm.h"
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

cclResult_t cclCommRegister(const cclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded(comm, "cclCommRegister", [&] {
    Communicator& c = checked_comm(comm, "cclCommRegister");
    if (handle == nullptr) throw_error(cclInvalidArgument, "cclCommRegister: handle is NULL");
    *handle = nullptr;
    *handle = const_cast<transport::RegisteredRegion*>(
        c.registrations("cclCommRegister").acquire(buff, size));
  });
}

cclResult_t cclCommDeregister(const cclComm_t comm, void* handle) {
  return guarded(comm, "cclCommDeregister", [&] {
    Communicator& c = checked_comm(comm, "cclCommDeregister");
    if (handle == nullptr) throw_error(cclInvalidArgument, "cclCommDeregister: handle is NULL");
    c.registrations("cclCommDeregister").release(handle);
  });
}

}  // extern "C"
