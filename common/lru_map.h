// A bounded least-recently-used map from a string key to a value, for the per-loop caches on the
// statement path (the analyzer's exact and shape caches, the policy engine's plans), and the
// table of keys seen once that decides what such a cache admits. Lookups take a string_view and
// allocate nothing; an insert past the capacity evicts the oldest entry. Not thread-safe: each
// loop owns its caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pgwarden {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct StringViewEqual {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

// Keys view the string held by the list node, which never moves.
template <typename Value>
class LruMap {
 public:
  struct Entry {
    std::string key;
    Value value;
  };

  explicit LruMap(size_t capacity) : capacity_(capacity) { index_.reserve(capacity); }

  // The entry for `key`, now the most recently used; null when absent.
  Entry* find(std::string_view key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return &*it->second;
  }

  // Inserts a key that is not present (the caller looked it up first).
  void insert(std::string key, Value value) {
    if (capacity_ == 0) return;
    if (lru_.size() >= capacity_) {
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
    lru_.push_front(Entry{std::move(key), std::move(value)});
    index_.emplace(lru_.front().key, lru_.begin());
  }

  void clear() {
    index_.clear();
    lru_.clear();
  }

  size_t size() const { return lru_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string_view, typename std::list<Entry>::iterator, StringViewHash,
                     StringViewEqual>
      index_;
};

// Keys seen once, as hashes in a direct-mapped table: a cache admits a key only when it is seen
// again, so one-off keys (a text with a fresh literal each time) cost no LRU churn and hold no
// memory. A collision merely admits a key early.
class SeenKeys {
 public:
  explicit SeenKeys(size_t entries) {
    size_t n = 1;
    while (n < entries) n <<= 1;
    slots_.assign(entries == 0 ? 0 : n, 0);
  }
  // True when `hash` was recorded before; records it either way.
  bool seenBefore(uint64_t hash) {
    if (slots_.empty()) return false;
    uint64_t& slot = slots_[hash & (slots_.size() - 1)];
    const bool seen = slot == hash;
    slot = hash;
    return seen;
  }

 private:
  std::vector<uint64_t> slots_;
};

}  // namespace pgwarden
