// The global cap on server connections per (role, database, writes), shared by the pools of
// every worker loop: pool.max_size holds for the sum over all loops, as PgBouncer's pool size
// does. Thread-safe; callbacks are never run while its lock is held.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pgwarden::pool {

class ConnectionSlots {
 public:
  using Key = std::string;

  // Why a loop asks for a slot. Only a client waiting records demand that other loops answer
  // by closing an idle connection; a spare (min_size, a probe login) takes what is free.
  enum class Want { kWaiter, kSpare };

  // The key of one pool: the role, the database and whether it is a write pool.
  static Key key(std::string_view role, std::string_view database, bool writes);

  // A loop registers. `wake` must be callable from any thread (it posts to the loop, which then
  // calls PoolManager::onSlotFreed). Returns the loop's index.
  int attach(std::function<void()> wake);
  // The loop leaves: its demand is forgotten and the slots handed to it go to the others. When
  // this returns, its `wake` is not running and will not run again. Never call it from `wake`.
  void detach(int loop);

  // Takes a slot for `key` when fewer than `max` are taken over all loops, or when one was
  // handed to `loop` (see give). Otherwise false, and with kWaiter `loop` now wants one.
  [[nodiscard]] bool tryTake(const Key& key, int max, int loop, Want want = Want::kWaiter);
  // A connection of `loop` for `key` closed: its slot goes to the loop that asked first among
  // the others that want one (handed to it, woken after the lock is released), or is freed.
  void give(const Key& key, int loop);
  // Whether another loop waits for a slot for `key` (this loop should close an idle connection).
  [[nodiscard]] bool othersWant(const Key& key, int loop) const;
  // `loop` needs no more for `key` now: its demand is cleared, and a slot handed to it and not
  // taken yet goes on to the next loop that wants one.
  void noLongerWants(const Key& key, int loop);

  // Slots taken for `key`: connections opening or open, and slots handed on and not taken yet.
  [[nodiscard]] int taken(const Key& key) const;
  // Keys with anything taken or wanted (the map stays bounded by what is in use).
  [[nodiscard]] size_t keys() const;

 private:
  struct Entry {
    int taken = 0;
    int max = 0;                // the cap the last tryTake saw (a reload may lower it)
    std::deque<int> wanting;    // loops that want a slot, first asker first, each once
    std::vector<int> handed;    // per loop: slots handed to it and not taken yet
  };
  // Frees one slot of `e`, or hands it to the first loop in `wanting` other than `except`;
  // returns the loop to wake, or -1.
  int release(Entry& e, int except);
  // Releases the slots handed to `loop` and not taken; adds the loops to wake to `wake`.
  void releaseHanded(Entry& e, int loop, std::vector<int>& wake);
  void eraseIfUnused(const Key& key);
  // Runs `loop`'s wake outside the lock; detach waits for it.
  void wakeLoop(int loop);

  mutable std::mutex mutex_;
  std::condition_variable woken_;  // a wake finished (detach waits for its loop's)
  std::unordered_map<Key, Entry> entries_;
  std::vector<std::function<void()>> wakes_;  // per loop; empty once detached
  std::vector<int> waking_;                   // per loop: wakes running now
};

}  // namespace pgwarden::pool
