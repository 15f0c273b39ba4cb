// A double-ended queue in one ring of slots that allocates on its first push and keeps its
// capacity while in use. std::deque allocates a map and a block before its first element and a
// block again each time its tail crosses one, so a session's queue of expected answers cost
// allocations per statement; this one costs none once it has grown to the session's pipeline
// depth, and release() gives the ring back when an idle session no longer needs it.
#pragma once

#include <cassert>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace pgwarden {

template <class T>
class RingQueue {
 public:
  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;
  RingQueue(RingQueue&& o) noexcept
      : slots_(std::exchange(o.slots_, nullptr)),
        cap_(std::exchange(o.cap_, 0)),
        head_(std::exchange(o.head_, 0)),
        size_(std::exchange(o.size_, 0)) {}
  RingQueue& operator=(RingQueue&& o) noexcept {
    if (this != &o) {
      clear();
      release();
      slots_ = std::exchange(o.slots_, nullptr);
      cap_ = std::exchange(o.cap_, 0);
      head_ = std::exchange(o.head_, 0);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~RingQueue() {
    clear();
    release();
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }

  T& operator[](size_t i) {
    assert(i < size_);
    return *slot(i);
  }
  const T& operator[](size_t i) const {
    assert(i < size_);
    return *slot(i);
  }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  void push_back(T v) {
    reserveOneMore();
    ::new (static_cast<void*>(slot(size_))) T(std::move(v));
    ++size_;
  }
  void push_front(T v) {
    reserveOneMore();
    head_ = (head_ + cap_ - 1) & (cap_ - 1);
    ::new (static_cast<void*>(slot(0))) T(std::move(v));
    ++size_;
  }
  // Inserts `v` before the element at `pos` (pos == size(): at the back).
  void insert(size_t pos, T v) {
    assert(pos <= size_);
    if (pos == size_) {
      push_back(std::move(v));
      return;
    }
    push_back(std::move(back()));
    for (size_t i = size_ - 2; i > pos; --i) (*this)[i] = std::move((*this)[i - 1]);
    (*this)[pos] = std::move(v);
  }
  void pop_front() {
    assert(size_ > 0);
    std::destroy_at(slot(0));
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }
  void clear() {
    while (size_ > 0) pop_front();
    head_ = 0;
  }
  // Frees the ring when it holds nothing; the next push allocates it again.
  void release() {
    if (size_ != 0 || slots_ == nullptr) return;
    std::allocator<T>().deallocate(slots_, cap_);
    slots_ = nullptr;
    cap_ = 0;
    head_ = 0;
  }

  template <bool Const>
  class Iter {
   public:
    using Queue = std::conditional_t<Const, const RingQueue, RingQueue>;
    using Ref = std::conditional_t<Const, const T&, T&>;
    Iter(Queue* q, size_t i) : q_(q), i_(i) {}
    Ref operator*() const { return (*q_)[i_]; }
    auto* operator->() const { return &(*q_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iter& o) const { return i_ == o.i_; }

   private:
    Queue* q_;
    size_t i_;
  };
  Iter<false> begin() { return {this, 0}; }
  Iter<false> end() { return {this, size_}; }
  Iter<true> begin() const { return {this, 0}; }
  Iter<true> end() const { return {this, size_}; }

 private:
  static constexpr size_t kFirstCapacity = 4;

  T* slot(size_t i) const { return slots_ + ((head_ + i) & (cap_ - 1)); }

  void reserveOneMore() {
    if (size_ < cap_) return;
    const size_t cap = cap_ == 0 ? kFirstCapacity : cap_ * 2;  // a power of two
    T* grown = std::allocator<T>().allocate(cap);
    for (size_t i = 0; i < size_; ++i) {
      ::new (static_cast<void*>(grown + i)) T(std::move(*slot(i)));
      std::destroy_at(slot(i));
    }
    if (slots_ != nullptr) std::allocator<T>().deallocate(slots_, cap_);
    slots_ = grown;
    cap_ = cap;
    head_ = 0;
  }

  T* slots_ = nullptr;
  size_t cap_ = 0;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace pgwarden
