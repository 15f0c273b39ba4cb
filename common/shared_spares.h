// Objects an event loop rebuilds at a steady rate (one per statement) and hands out as
// shared_ptr: the last few are kept, and one that no one else holds any more is handed out
// again to be refilled in place (copy-assignment reuses its strings' and vectors' storage), so
// the steady state costs no malloc. Thread-compatible: keep one per thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/recycling_allocator.h"

namespace pgwarden {

template <class T, size_t N = 2>
class SharedSpares {
 public:
  static_assert(N > 0);

  // An object to refill: a kept one no one else holds, as it was left (the caller overwrites
  // it), or a new default-constructed one, which is kept in place of the oldest. Under
  // AddressSanitizer always a new one, so that a reader who kept a reference without holding
  // the shared_ptr is still reported there.
  //
  // `mark`, when given, points at the object's mark: a number the caller keeps with it to say
  // what it left there (0 for a new object), so the next refill may rewrite only what differs.
  std::shared_ptr<T> take(uint64_t** mark = nullptr) {
    if constexpr (kRecycleBlocks) {
      for (size_t i = 0; i < N; ++i) {
        if (kept_[i] && kept_[i].use_count() == 1) {
          // The other holders' releases (possibly on another thread) happen before the refill.
          std::atomic_thread_fence(std::memory_order_acquire);
          if (mark != nullptr) *mark = &marks_[i];
          return kept_[i];
        }
      }
    }
    auto fresh = std::make_shared<T>();
    kept_[next_] = fresh;
    marks_[next_] = 0;
    if (mark != nullptr) *mark = &marks_[next_];
    next_ = (next_ + 1) % N;
    return fresh;
  }

  // Lets go of every kept object (those still held elsewhere live on with their holders).
  void clear() {
    for (std::shared_ptr<T>& kept : kept_) kept.reset();
    marks_.fill(0);
  }

 private:
  std::array<std::shared_ptr<T>, N> kept_;
  std::array<uint64_t, N> marks_{};
  size_t next_ = 0;
};

}  // namespace pgwarden
