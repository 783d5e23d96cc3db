// One piece of queued stream work: a move-only callable returning a cclResult_t, stored inline.
//
// Why not std::function: libstdc++'s keeps only 16 bytes inline, so every queued collective (its
// lambda holds the buffers, count, type, op and a reference to the communicator: 60-90 bytes)
// cost a heap allocation or two when it was queued and a free when it ran. A WorkItem keeps up to
// kInlineBytes in place; only a larger callable (none of the library's) goes to the heap.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "ccl/ccl.h"

namespace ccl {

class WorkItem {
 public:
  static constexpr size_t kInlineBytes = 112;

  WorkItem() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, WorkItem>>>
  WorkItem(F&& f) {  // NOLINT(google-explicit-constructor): a callable is a WorkItem
    using D = std::decay_t<F>;
    if constexpr (fits_inline<D>()) {
      new (storage_) D(std::forward<F>(f));
      ops_ = &kOps<D>;
    } else {
      using Boxed = std::unique_ptr<D>;
      new (storage_) Boxed(std::make_unique<D>(std::forward<F>(f)));
      ops_ = &kBoxedOps<D>;
    }
  }
  WorkItem(WorkItem&& other) noexcept { take(other); }
  WorkItem& operator=(WorkItem&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  WorkItem(const WorkItem&) = delete;
  WorkItem& operator=(const WorkItem&) = delete;
  ~WorkItem() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  // Runs the work (it must not throw: queued work is a guarded API body).
  cclResult_t operator()() { return ops_->invoke(storage_); }
  void reset() {
    if (ops_ != nullptr) std::exchange(ops_, nullptr)->destroy(storage_);
  }

 private:
  struct Ops {
    cclResult_t (*invoke)(void*);
    void (*move)(void* from, void* to);  // move-constructs at `to`, destroys `from`
    void (*destroy)(void*);
  };
  template <class D>
  static constexpr bool fits_inline() {
    return sizeof(D) <= kInlineBytes && alignof(D) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<D>;
  }
  template <class D>
  static constexpr Ops kOps = {[](void* p) -> cclResult_t { return (*static_cast<D*>(p))(); },
                               [](void* from, void* to) {
                                 new (to) D(std::move(*static_cast<D*>(from)));
                                 static_cast<D*>(from)->~D();
                               },
                               [](void* p) { static_cast<D*>(p)->~D(); }};
  template <class D>
  static constexpr Ops kBoxedOps = {
      [](void* p) -> cclResult_t { return (**static_cast<std::unique_ptr<D>*>(p))(); },
      [](void* from, void* to) {
        new (to) std::unique_ptr<D>(std::move(*static_cast<std::unique_ptr<D>*>(from)));
        static_cast<std::unique_ptr<D>*>(from)->~unique_ptr();
      },
      [](void* p) { static_cast<std::unique_ptr<D>*>(p)->~unique_ptr(); }};

  void take(WorkItem& other) noexcept {
    if (other.ops_ == nullptr) return;
    other.ops_->move(other.storage_, storage_);
    ops_ = std::exchange(other.ops_, nullptr);
  }

  const Ops* ops_ = nullptr;
  alignas(std::max_align_t) std::byte storage_[kInlineBytes];
};

}  // namespace ccl
