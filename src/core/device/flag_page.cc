#include "core/device/flag_page.h"

#include <atomic>

namespace ccl {

namespace {
std::atomic_ref<uint32_t> word(uint32_t* words, size_t index) {
  return std::atomic_ref<uint32_t>(words[index]);
}
}  // namespace

size_t FlagPage::bytes_for(int nranks) {
  // The flags, a finished-operation word per rank, the released word; whole pages.
  const size_t words = algo::device::flags_per_page(nranks) + nranks + 1;
  return (words * sizeof(uint32_t) + 4095) / 4096 * 4096;
}

FlagPage::FlagPage(transport::shm::ShmSegment segment, int nranks)
    : segment_(std::move(segment)), nranks_(nranks) {}

std::unique_ptr<FlagPage> FlagPage::create(const std::string& name, int nranks) {
  auto page = std::unique_ptr<FlagPage>(
      new FlagPage(transport::shm::ShmSegment::create(name, bytes_for(nranks)), nranks));
  for (size_t i = 0; i < page->flag_count(); ++i) word(page->words(), i).store(kEmpty);
  return page;
}

std::unique_ptr<FlagPage> FlagPage::open(const std::string& name, int nranks) {
  const size_t bytes = bytes_for(nranks);
  std::vector<transport::shm::ShmSegment> mapped =
      transport::shm::ShmSegment::open(name, bytes, {{0, bytes}});
  return std::unique_ptr<FlagPage>(new FlagPage(std::move(mapped.at(0)), nranks));
}

void FlagPage::map_for_device() {
  registration_ = std::make_unique<cuda::HostRegistration>(segment_.base(), segment_.size());
}

uint64_t FlagPage::flag_address(const algo::device::Flag& flag) const {
  return registration_->device_address(words() + algo::device::flag_index(flag, nranks_));
}

uint64_t FlagPage::done_address(int rank) const {
  return registration_->device_address(words() + flag_count() + rank);
}

uint32_t FlagPage::done(int rank) const {
  return word(words(), flag_count() + rank).load(std::memory_order_acquire);
}

bool FlagPage::consumed(int producer) const {
  for (int line = 0; line < algo::device::kLines; ++line) {
    for (unsigned half = 0; half < algo::device::kHalves; ++half) {
      for (int q = 0; q < nranks_; ++q) {
        const algo::device::Flag f{static_cast<algo::device::Line>(line),
                                   static_cast<uint8_t>(half), static_cast<int16_t>(producer),
                                   static_cast<int16_t>(q)};
        if (word(words(), algo::device::flag_index(f, nranks_)).load() == kFull) return false;
      }
    }
  }
  return true;
}

void FlagPage::release() {
  word(words(), flag_count() + nranks_).store(1);
  for (size_t i = 0; i < flag_count(); ++i) word(words(), i).store(kAbort);
}

bool FlagPage::released() const {
  return word(words(), flag_count() + nranks_).load(std::memory_order_acquire) != 0;
}

}  // namespace ccl
