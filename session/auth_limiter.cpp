// Fixed one-minute windows per address; eviction of the oldest window when the table is full.
// Every loop counts in the one table, under its lock; their clocks may be a few milliseconds
// apart, so a window is over only when `now` is past its start by the window's length.
#include "session/auth_limiter.h"

namespace pgwarden::daemon {

namespace {

bool windowOver(uint64_t now_ms, uint64_t start_ms) {
  return now_ms > start_ms && now_ms - start_ms >= AuthLimiter::kWindowMs;
}

}  // namespace

bool AuthLimiter::blocked(const std::string& peer, uint64_t now_ms, int per_minute) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(peer);
  if (it == entries_.end()) return false;
  if (windowOver(now_ms, it->second.window_start_ms)) return false;
  return it->second.failures >= per_minute;
}

int AuthLimiter::recordFailure(const std::string& peer, uint64_t now_ms) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(peer);
  if (it == entries_.end()) {
    if (entries_.size() >= max_entries_) {
      expireLocked(now_ms);
      if (entries_.size() >= max_entries_) {
        auto oldest = entries_.begin();
        for (auto i = entries_.begin(); i != entries_.end(); ++i) {
          if (i->second.window_start_ms < oldest->second.window_start_ms) oldest = i;
        }
        entries_.erase(oldest);
      }
    }
    it = entries_.emplace(peer, Entry{now_ms, 0}).first;
  }
  if (windowOver(now_ms, it->second.window_start_ms)) it->second = Entry{now_ms, 0};
  return ++it->second.failures;
}

void AuthLimiter::expire(uint64_t now_ms) {
  std::lock_guard lock(mu_);
  expireLocked(now_ms);
}

size_t AuthLimiter::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void AuthLimiter::expireLocked(uint64_t now_ms) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (windowOver(now_ms, it->second.window_start_ms)) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pgwarden::daemon
