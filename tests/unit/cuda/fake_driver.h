// A fake CUDA driver behind ccl's driver table (src/cuda/cuda_driver_api.h), for the tests of the
// CUDA path on machines without a GPU.
//
// Device memory is strict: an arena whose addresses (the "device" view) are mapped PROT_NONE, so
// any host load or store through a device pointer faults, as it would on a real GPU; the fake
// driver reaches the same bytes through a second mapping of the same memfd. The mapping is
// shared, so a forked child (a rank as a process) sees the same memory, and the two never hand
// out the same bytes (a cursor in the arena's first page). CUDA IPC is as between processes:
// another process opens a handle once, at an address of its own (a new mapping), until it closes
// it; a process cannot open its own. Streams are real queues, each run by a thread of its own,
// so work queued on a stream runs later, in order, as on a GPU: a test that forgot to wait for a
// stream reads stale data. Host functions of every stream run on one thread, as CUDA's do.
// Contexts are per device (primary contexts), and what needs one fails without one current;
// kernels reach another device's memory only with peer access. docs/cuda.md lists every rule.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct CUstream_st;

namespace ccl_test::fake_cuda {

// ThreadSanitizer kills a child forked from a threaded process once it starts a thread: the
// tests whose ranks are forked processes skip themselves there (Release and ASan run them).
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kForkedChildrenRun = false;
#else
inline constexpr bool kForkedChildrenRun = true;
#endif

// Installs the fake driver (ccl::cuda::set_cuda_driver_for_testing); uninstall() puts "no
// driver" back. Both between tests only, with no communicator alive.
void install();
void uninstall();
// Make cuStreamWaitValue32 answer CUDA_ERROR_NOT_SUPPORTED (the host-function fallback).
void refuse_stream_wait_value(bool refuse);

// Devices: `count` GPUs (1 after install), any two of which have peer access if `p2p`, over
// NVLink if `nvlink` (cuDeviceGetP2PAttribute says every atomic works), else PCIe. A
// thread's contexts are on the device it last chose with use_device (0 at first), so that rank
// threads can sit on GPUs of their own; memory is one arena whatever the device.
void set_devices(int count, bool p2p, bool nvlink = true);
// The devices' PCI bus ids (cuDeviceGetPCIBusId), one per device: as many devices as ids. By
// default device i is "0000:<3B+i>:00.0".
void set_bus_ids(const std::vector<std::string>& ids);
void use_device(int device);

// Device memory: allocation (as cuMemAlloc; cuMemFree and device_free give it back), and the
// test's own access to it.
void* device_alloc(size_t bytes);
void device_free(void* p);
void to_device(void* device_dst, const void* host_src, size_t bytes);    // synchronous
void from_device(void* host_dst, const void* device_src, size_t bytes);  // synchronous

// A CUDA stream of the fake driver (cuStreamCreate), and "kernels": work on a stream, run on its
// thread in order; `fn` gets a host-accessible alias of device memory through alias().
// blocking: as cuStreamCreate's flags 0 (the legacy stream's rule applies to it); false:
// CU_STREAM_NON_BLOCKING.
CUstream_st* create_stream(bool blocking = true);
void destroy_stream(CUstream_st* stream);
void launch(CUstream_st* stream, std::function<void()> fn);
void synchronize(CUstream_st* stream);
// Kernels launched (cuLaunchKernel; each runs ccl's CPU kernel of the same name on the stream)
// and IPC handles opened (cuIpcOpenMemHandle), since install.
int kernel_launches();
int ipc_opens();
// Peer access enabled (cuCtxEnablePeerAccess), since the process started, one per pair of devices.
int peer_access_enables();
// Make cuCtxEnablePeerAccess fail although cuDeviceCanAccessPeer says yes (until install()).
void refuse_peer_access_enable(bool refuse);
// The host-accessible alias of a device address (for launch()'s work only).
void* alias(const void* device_ptr);

// How often a host thread asked whether a stream or an event was done (cuEventQuery,
// cuStreamSynchronize), from any thread, since the process started: what "no host thread
// waited for the stream" is measured by. And the stream memory operations queued
// (cuStreamWaitValue32, cuStreamWriteValue32, cuStreamBatchMemOp calls).
int host_waits();
// dmabuf descriptors handed out (cuMemGetHandleForAddressRange), since the process started.
int dmabuf_export_count();
int mem_op_calls();

// Every thread that starts after set_default_context(true) begins with the fake's context
// current (as a thread of a CUDA program after cudaSetDevice); make_context_current() makes it
// current on the calling thread now.
void set_default_context(bool current);
void make_context_current();

// Holds `stream` back: the work queued on it after the gate waits until open() (or the gate's
// destruction; at most 60 s), as a GPU busy with earlier work would.
class Gate {
 public:
  explicit Gate(CUstream_st* stream);
  ~Gate();
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void open();

 private:
  std::shared_ptr<std::atomic<bool>> open_;
};

// Graph capture, as cuStreamBeginCapture / cuStreamEndCapture / cuGraphLaunch: while a stream
// captures, the work queued on it is kept, not run (cuStreamIsCapturing says ACTIVE,
// cuStreamSynchronize on it fails, an event recorded on it completes only when the graph runs);
// launch_graph queues all of it again, with the arguments it was queued with. The modes are
// CUDA's: during a Global capture (torch's) no thread may allocate, free, pin or synchronize
// (cuMemAlloc, cuMemFree, cuMemHostAlloc, cuMemHostRegister, cuStreamSynchronize, ...); during
// a ThreadLocal one, the capturing thread may not; Relaxed forbids nothing. Such a call fails
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the capture: end_capture then gives
// nullptr, as cuStreamEndCapture gives CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
enum class CaptureMode { Global, ThreadLocal, Relaxed };
struct Graph;
void begin_capture(CUstream_st* stream, CaptureMode mode = CaptureMode::Global);
Graph* end_capture(CUstream_st* stream);
size_t graph_nodes(const Graph* graph);
void launch_graph(const Graph* graph, CUstream_st* stream);
void destroy_graph(Graph* graph);

}  // namespace ccl_test::fake_cuda
