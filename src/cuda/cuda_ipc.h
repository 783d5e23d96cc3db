// CUDA IPC between the processes of one host: a device buffer is exported as the IPC handle of
// its allocation and its offset in it; a peer opens the handle once (cuIpcOpenMemHandle with lazy
// peer access, so buffers on another GPU work where P2P does) and keeps it open, since an open
// costs far more than a collective of a few KiB. Several processes on one GPU may open each
// other's buffers (the case NCCL refused before 2.30). Free of CUDA types.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>

namespace ccl::cuda {

// A buffer as another process can find it. A plain struct of fixed size: ranks exchange it
// byte for byte.
struct IpcBuffer {
  std::array<unsigned char, 64> handle{};  // CUipcMemHandle of the allocation
  uint64_t offset = 0;                     // of the buffer in its allocation
  uint64_t address = 0;                    // the buffer in its own process
  // Whose process it lives in: a random number drawn once per process, not the pid, which
  // processes in different PID namespaces (containers on one host) can share.
  uint64_t process = 0;
  int32_t valid = 0;  // 0: could not be exported (not device memory)
  int32_t pad = 0;
};
static_assert(sizeof(IpcBuffer) == 96);

// This process's number of IpcBuffer::process.
uint64_t this_process();

// `data`, a device pointer, as an IpcBuffer (valid 0 where the driver refuses: e.g. memory
// from cuMemCreate, or managed memory, which IPC cannot share).
IpcBuffer export_buffer(const void* data);

// A device as every process of the host names it (cuDeviceGetUuid): ordinals differ between
// processes (CUDA_VISIBLE_DEVICES), the UUID does not. All zero where it cannot be had.
struct DeviceUuid {
  std::array<unsigned char, 16> bytes{};
  auto operator<=>(const DeviceUuid&) const = default;
};
static_assert(sizeof(DeviceUuid) == 16);

// The device of the caller's current context (a ContextScope of cuda_memory.h).
DeviceUuid current_device_uuid();

// How the current context's device reaches device `peer`'s memory, fastest first: the same
// device; NVLink (the driver says every atomic works over the link, which PCIe P2P does not
// offer: cuDeviceGetP2PAttribute NATIVE_ATOMIC_SUPPORTED); PCIe P2P; not at all (no P2P, a
// device this process does not see, no driver). Ordered so that the slowest of several is the
// largest.
enum class PeerLink : uint8_t { SameDevice, NvLink, Pcie, None };
PeerLink link_to(const DeviceUuid& peer);
const char* peer_link_name(PeerLink link);

// The handles this process opened, each opened once and kept open across calls (opening costs
// the driver a mapping), at most kKeepOpen of them between calls: past that, trim() closes the
// ones the last call did not use, so that a program that frees and allocates its buffers for
// every call does not keep its peers' freed allocations mapped without bound. Closed at
// destruction, each in the context that opened it. Not thread-safe (the communicator uses it
// under its op mutex).
class IpcImports {
 public:
  IpcImports() = default;
  ~IpcImports();
  IpcImports(const IpcImports&) = delete;
  IpcImports& operator=(const IpcImports&) = delete;

  // Where `buffer`, on device `device`, is in this process: its own address if it lives here,
  // else the opened allocation plus the offset. A buffer of this process on another device than
  // the current context's gets peer access enabled first (once per device: a kernel may read
  // another GPU's memory only then; IPC handles enable it themselves). Throws
  // cclUnhandledCudaError when the handle cannot be opened or peer access not enabled.
  void* open(const IpcBuffer& buffer, const DeviceUuid& device);
  size_t opened() const { return opened_.size(); }
  // After a call, once no rank reads or writes a peer's buffer any more: closes the handles this
  // call did not open or use, if more than kKeepOpen are open. Starts the next call.
  void trim();

  static constexpr size_t kKeepOpen = 64;

 private:
  struct Opened {
    uint64_t base = 0;        // the allocation here
    void* context = nullptr;  // the context that opened it
    uint64_t call = 0;        // the last call that used it
  };
  void close(const Opened& entry);

  std::map<std::array<unsigned char, 64>, Opened> opened_;  // handle -> where it is here
  uint64_t call_ = 1;
  std::set<DeviceUuid> peers_enabled_;  // devices the current context has peer access to
};

}  // namespace ccl::cuda
