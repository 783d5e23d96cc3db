// The flags of the device programs (algorithms/device/device_program.h) of one communicator's
// ranks: one page of 32-bit words in shared host memory (/dev/shm), mapped by every rank and
// registered for its device, so that streams wait on and write them (stream memory
// operations) and the host can read and write them too. One word per flag, then one word per
// rank that its stream sets to the number of its last finished operation (the watchdog reads
// it), then a word that says the page was released.
//
// A flag holds kEmpty or kFull. A stream waits for "kFull or kAbort" (or "kEmpty or kAbort"):
// release() writes kAbort into every flag, which satisfies every wait of every rank's stream, so
// that a communicator that failed or was aborted never leaves a stream blocked (its results are
// then undefined, and the communicator reports the failure).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "algorithms/device/device_program.h"
#include "cuda/stream_ops.h"
#include "transport/shm/shm_segment.h"

namespace ccl {

class FlagPage {
 public:
  static constexpr uint32_t kFull = 1;
  static constexpr uint32_t kEmpty = 2;
  static constexpr uint32_t kAbort = 4;

  // Rank 0 creates the page (every flag Empty); the others open it once rank 0 says it exists.
  static std::unique_ptr<FlagPage> create(const std::string& name, int nranks);
  static std::unique_ptr<FlagPage> open(const std::string& name, int nranks);
  // Removes the name once every rank has opened it (the creator's job).
  void unlink() { segment_.unlink(); }
  // Registers the page for the devices (cuMemHostRegister), in the current context.
  void map_for_device();

  // The device address of a flag, of a rank's finished-operation word.
  uint64_t flag_address(const algo::device::Flag& flag) const;
  uint64_t done_address(int rank) const;
  // The number in rank's finished-operation word.
  uint32_t done(int rank) const;

  // Whether no rank reads `producer`'s scratch any more: every flag it produces is Empty (or
  // released).
  bool consumed(int producer) const;

  // Every flag set to kAbort and the page marked released: every wait on it goes on.
  void release();
  bool released() const;

  // What a stream waits for to see a flag in `state`.
  static uint32_t wait_mask(algo::device::FlagState state) {
    return (state == algo::device::FlagState::Full ? kFull : kEmpty) | kAbort;
  }
  static uint32_t value(algo::device::FlagState state) {
    return state == algo::device::FlagState::Full ? kFull : kEmpty;
  }

 private:
  FlagPage(transport::shm::ShmSegment segment, int nranks);
  static size_t bytes_for(int nranks);
  uint32_t* words() const { return reinterpret_cast<uint32_t*>(segment_.base()); }
  size_t flag_count() const { return algo::device::flags_per_page(nranks_); }

  transport::shm::ShmSegment segment_;
  int nranks_;
  std::unique_ptr<cuda::HostRegistration> registration_;
};

}  // namespace ccl
