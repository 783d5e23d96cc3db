// A shared window: one-sided access among ranks that share memory (DESIGN.md principle 2, "put/get
// where the medium allows"). Every rank of the window owns two mailboxes (parity 0 and 1); it
// writes only its own and reads the other ranks' in place, with no copy through a message ring.
// A mailbox is a flag, a small inline area in the flag's cache line, and a bulk area.
//
// The protocol is the algorithm's (algorithms/direct.h): the window moves no data and orders
// nothing beyond what its flag operations promise:
//   publish(parity, v)   release: every write to the own mailbox before it is visible to a
//                        reader that sees flag >= v.
//   flush()              wakes the ranks that sleep in wait_for() on what was published. Done
//                        apart from publish() because waking needs a full fence after the flag
//                        store, which would stall until the reader gives up the flag's cache
//                        line; at the end of the operation the store has long completed and the
//                        fence is cheap. wait_for() flushes first, so no two ranks sleep on each
//                        other's unflushed flags. An operation must flush before it returns.
//   flag(rank, parity)   acquire (seq_cst) load of that rank's flag.
// Flags only grow. Which values mean what, and when a mailbox may be written again, is the
// algorithm's business.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace ccl::transport {

// A region of registered memory (cclMemAlloc) as its owner describes it to peers: opaque here,
// small enough to travel in a mailbox's inline area.
struct RegisteredRegion;

struct RemoteRegion {
  uint64_t words[4];
};

class SharedWindow {
 public:
  // Bytes that fit in the flag's cache line: a message this small travels with its flag.
  static constexpr size_t kInlineBytes = 48;

  virtual ~SharedWindow() = default;

  // The window spans ranks 0..nranks()-1 of the communicator (every rank shares memory).
  virtual int nranks() const = 0;
  virtual int rank() const = 0;
  // Bulk bytes per mailbox.
  virtual size_t capacity() const = 0;

  // The mailbox data area of `rank` for a message of `bytes` (<= capacity()): the inline area
  // when bytes <= kInlineBytes, else the bulk area. 64-byte aligned for bulk, 16 for inline.
  virtual std::byte* mailbox(int rank, unsigned parity, size_t bytes) = 0;

  virtual void publish(unsigned parity, uint64_t value) = 0;
  virtual void flush() = 0;
  virtual uint64_t flag(int rank, unsigned parity) const = 0;

  // Sleeps until flag(rank, parity) >= value, `timeout` passes, or interrupt() of the owning
  // transport; may return early. Re-checks the flag after announcing itself, so a publish racing
  // with the sleep is never lost. Throws RemoteError if that rank died before publishing.
  virtual void wait_for(int rank, unsigned parity, uint64_t value,
                        std::chrono::microseconds timeout) = 0;

  // Registered memory: whether [ptr, ptr + bytes), inside the call's registration `region`
  // (registered_region.h; nullptr: the buffer has none), is memory the other ranks can map (then
  // its description, from the key this window's transport added), and the address of a rank's
  // described region here (nullptr if it cannot be mapped). Windows without the capability
  // answer false / nullptr.
  virtual bool describe(const RegisteredRegion* /*region*/, const void* /*ptr*/, size_t /*bytes*/,
                        RemoteRegion* /*out*/) {
    return false;
  }
  // Cross-memory attach: copies `bytes` at address `remote` of `rank`'s process into `local`;
  // true when all were read, false where the window or the kernel cannot (ptrace rules, Yama,
  // CCL_SHM_CMA=0; then `local` holds nothing useful). Slower than memcpy (the kernel pins each
  // page: 7.6 against 22 GB/s at 1 MiB here), so callers give it only part of the work.
  virtual bool read_remote(int /*rank*/, const void* /*remote*/, void* /*local*/,
                           size_t /*bytes*/) {
    return false;
  }
  virtual std::byte* map_region(int /*rank*/, const RemoteRegion& /*region*/, size_t /*bytes*/) {
    return nullptr;
  }
};

}  // namespace ccl::transport
