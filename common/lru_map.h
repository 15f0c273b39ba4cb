// A bounded least-recently-used map from a string key to a value, for the per-loop caches on the
// statement path (the analyzer's exact and shape caches, the policy engine's plans), and the
// table of keys seen once that decides what such a cache admits. Lookups take a string_view and
// allocate nothing; an insert past the capacity evicts the oldest entry. Not thread-safe: each
// loop owns its caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/string_hash.h"

namespace pgwarden {

// The index is open addressing over a flat array of (hash, entry) slots, at most half full, with
// linear probing and backward-shift deletion: a lookup of an absent key (every text with a fresh
// literal) reads one or two adjacent slots, where a node-based map walked a bucket's nodes, each a
// likely cache miss on the statement path. Entries live in a list and never move.
template <typename Value>
class LruMap {
 public:
  struct Entry {
    std::string key;
    Value value;
    size_t hash = 0;
  };

  explicit LruMap(size_t capacity) : capacity_(capacity) {
    if (capacity == 0) return;
    size_t n = 8;
    while (n < capacity * 2) n <<= 1;
    slots_.assign(n, Slot{});
    mask_ = n - 1;
  }

  // The entry for `key`, now the most recently used; null when absent.
  Entry* find(std::string_view key) { return find(key, StringViewHash{}(key)); }
  // The same with the key's hash (StringViewHash) computed by the caller, who needs it too.
  Entry* find(std::string_view key, size_t h) {
    if (slots_.empty()) return nullptr;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.entry == nullptr) return nullptr;
      if (s.hash == h && s.entry->key == key) {
        lru_.splice(lru_.begin(), lru_, s.entry->self);
        return s.entry;
      }
    }
  }

  // Inserts a key that is not present (the caller looked it up first).
  void insert(std::string key, Value value) {
    const size_t h = StringViewHash{}(key);
    insert(std::move(key), std::move(value), h);
  }
  // The same with the key's hash (StringViewHash).
  void insert(std::string key, Value value, size_t h) {
    if (capacity_ == 0) return;
    if (lru_.size() >= capacity_) {
      unindex(&lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(Node{Entry{std::move(key), std::move(value), h}, {}});
    Node& node = lru_.front();
    node.self = lru_.begin();
    size_t i = h & mask_;
    while (slots_[i].entry != nullptr) i = (i + 1) & mask_;
    slots_[i] = Slot{h, &node};
  }

  void clear() {
    lru_.clear();
    std::fill(slots_.begin(), slots_.end(), Slot{});
  }

  size_t size() const { return lru_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Node : Entry {
    typename std::list<Node>::iterator self;  // for splicing the node found through its slot
  };
  struct Slot {
    size_t hash = 0;
    Node* entry = nullptr;
  };

  // Empties the slot of `node` and shifts back the entries probed past it, so that every entry
  // stays reachable from its home slot without tombstones.
  void unindex(const Node* node) {
    size_t i = node->hash & mask_;
    while (slots_[i].entry != node) i = (i + 1) & mask_;
    for (size_t j = (i + 1) & mask_; slots_[j].entry != nullptr; j = (j + 1) & mask_) {
      const size_t home = slots_[j].hash & mask_;
      // The entry at j may move to the hole at i unless its home lies cyclically in (i, j].
      const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
  }

  size_t capacity_;
  std::list<Node> lru_;  // most recently used first
  std::vector<Slot> slots_;
  size_t mask_ = 0;
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
