// Counting server connections per pool key over every worker loop, handing a freed slot to the
// loop that asked first, and waking that loop outside the lock.
#include "pool/connection_slots.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace pgwarden::pool {

namespace {

void forget(std::deque<int>& wanting, int loop) {
  wanting.erase(std::remove(wanting.begin(), wanting.end(), loop), wanting.end());
}

}  // namespace

ConnectionSlots::Key ConnectionSlots::key(std::string_view role, std::string_view database,
                                          bool writes) {
  Key k;
  k.reserve(role.size() + database.size() + 3);
  k.append(role).push_back('\0');
  k.append(database).push_back('\0');
  k.push_back(writes ? 'w' : 'r');
  return k;
}

int ConnectionSlots::attach(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wakes_.push_back(std::move(wake));
  waking_.push_back(0);
  return static_cast<int>(wakes_.size()) - 1;
}

void ConnectionSlots::detach(int loop) {
  std::vector<int> wake;
  {
    std::lock_guard lock(mutex_);
    if (loop < 0 || loop >= static_cast<int>(wakes_.size())) return;
    wakes_[static_cast<size_t>(loop)] = nullptr;
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = it->second;
      forget(e.wanting, loop);
      releaseHanded(e, loop, wake);
      it = e.taken == 0 && e.wanting.empty() ? entries_.erase(it) : std::next(it);
    }
  }
  for (int w : wake) wakeLoop(w);
  std::unique_lock lock(mutex_);
  woken_.wait(lock, [&] { return waking_[static_cast<size_t>(loop)] == 0; });
}

bool ConnectionSlots::tryTake(const Key& key, int max, int loop, Want want) {
  std::lock_guard lock(mutex_);
  Entry& e = entries_[key];
  e.max = max;
  if (static_cast<size_t>(loop) < e.handed.size() && e.handed[static_cast<size_t>(loop)] > 0) {
    --e.handed[static_cast<size_t>(loop)];  // counted in `taken` since it was handed over
    return true;
  }
  if (e.taken < max) {
    ++e.taken;
    return true;
  }
  if (want == Want::kWaiter &&
      std::find(e.wanting.begin(), e.wanting.end(), loop) == e.wanting.end()) {
    e.wanting.push_back(loop);
  }
  eraseIfUnused(key);
  return false;
}

void ConnectionSlots::give(const Key& key, int loop) {
  int wake = -1;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.taken == 0) return;  // never taken: nothing to give
    wake = release(it->second, loop);
    eraseIfUnused(key);
  }
  if (wake >= 0) wakeLoop(wake);
}

bool ConnectionSlots::othersWant(const Key& key, int loop) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  const auto& wanting = it->second.wanting;
  return std::any_of(wanting.begin(), wanting.end(), [loop](int w) { return w != loop; });
}

void ConnectionSlots::noLongerWants(const Key& key, int loop) {
  std::vector<int> wake;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    forget(e.wanting, loop);
    releaseHanded(e, loop, wake);
    eraseIfUnused(key);
  }
  for (int w : wake) wakeLoop(w);
}

int ConnectionSlots::taken(const Key& key) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.taken;
}

size_t ConnectionSlots::keys() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

int ConnectionSlots::release(Entry& e, int except) {
  // Over a cap a reload lowered, a freed slot is not handed on: the total comes down.
  if (e.taken <= e.max) {
    for (auto it = e.wanting.begin(); it != e.wanting.end(); ++it) {
      const int w = *it;
      if (w == except) continue;
      e.wanting.erase(it);
      if (e.handed.size() <= static_cast<size_t>(w)) e.handed.resize(static_cast<size_t>(w) + 1);
      ++e.handed[static_cast<size_t>(w)];
      return w;
    }
  }
  --e.taken;
  return -1;
}

void ConnectionSlots::releaseHanded(Entry& e, int loop, std::vector<int>& wake) {
  if (static_cast<size_t>(loop) >= e.handed.size()) return;
  for (int n = std::exchange(e.handed[static_cast<size_t>(loop)], 0); n > 0; --n) {
    if (const int w = release(e, loop); w >= 0) wake.push_back(w);
  }
}

void ConnectionSlots::eraseIfUnused(const Key& key) {
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.taken == 0 && it->second.wanting.empty()) {
    entries_.erase(it);
  }
}

void ConnectionSlots::wakeLoop(int loop) {
  std::function<void()> fn;
  {
    std::lock_guard lock(mutex_);
    if (loop < 0 || loop >= static_cast<int>(wakes_.size())) return;
    if (!wakes_[static_cast<size_t>(loop)]) return;  // detached
    fn = wakes_[static_cast<size_t>(loop)];
    ++waking_[static_cast<size_t>(loop)];
  }
  fn();
  {
    std::lock_guard lock(mutex_);
    --waking_[static_cast<size_t>(loop)];
  }
  woken_.notify_all();
}

}  // namespace pgwarden::pool
