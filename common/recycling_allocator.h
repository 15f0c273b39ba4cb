// An allocator for objects an event loop makes and drops at a steady rate (one per statement):
// single objects it frees are kept on a small per-thread free list and handed out again, so the
// steady state costs no malloc. Meant for std::allocate_shared, which rebinds it to its control
// block type; every rebound type has its own list.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace pgwarden {

// Under AddressSanitizer every block comes from the heap, so a use after free is still caught.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRecycleBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kRecycleBlocks = false;
#else
inline constexpr bool kRecycleBlocks = true;
#endif
#else
inline constexpr bool kRecycleBlocks = true;
#endif

template <class T>
class RecyclingAllocator {
 public:
  using value_type = T;
  // Blocks kept per thread and type: a session's pipeline rarely holds more at once, and what is
  // beyond goes back to the heap.
  static constexpr size_t kKeep = 64;

  RecyclingAllocator() noexcept = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>& /*other*/) noexcept {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (n == 1) {
      if (void* p = FreeList::pop()) return static_cast<T*>(p);
    }
    return std::allocator<T>{}.allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n == 1 && FreeList::push(p)) return;
    std::allocator<T>{}.deallocate(p, n);
  }

  template <class U>
  bool operator==(const RecyclingAllocator<U>& /*other*/) const noexcept {
    return true;
  }

 private:
  // A freed block holds the link to the next one. A block freed on another thread joins that
  // thread's list, which is as good. The list is emptied when its thread ends; blocks freed
  // after that (by another thread-local's destructor) go straight back to the heap.
  struct FreeList {
    struct Node {
      Node* next;
    };
    static_assert(sizeof(T) >= sizeof(Node) && alignof(T) >= alignof(Node));

    Node* head = nullptr;
    size_t size = 0;

    ~FreeList() {
      gone() = true;
      while (head != nullptr) {
        Node* n = head;
        head = n->next;
        n->~Node();
        std::allocator<T>{}.deallocate(reinterpret_cast<T*>(n), 1);
      }
    }

    static void* pop() {
      if (!kRecycleBlocks || gone()) return nullptr;
      FreeList& l = list();
      Node* n = l.head;
      if (n == nullptr) return nullptr;
      l.head = n->next;
      --l.size;
      n->~Node();
      return n;
    }
    static bool push(void* p) {
      if (!kRecycleBlocks || gone()) return false;
      FreeList& l = list();
      if (l.size >= kKeep) return false;
      l.head = ::new (p) Node{l.head};
      ++l.size;
      return true;
    }
    static FreeList& list() {
      thread_local FreeList l;
      return l;
    }
    // Trivially destructible, so it can still be read after `l` above is destroyed.
    static bool& gone() {
      thread_local bool g = false;
      return g;
    }
  };
};

}  // namespace pgwarden
