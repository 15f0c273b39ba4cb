// Fixed one-minute windows per address; eviction of the oldest window when the table is full.
#include "session/auth_limiter.h"

namespace pgwarden::daemon {

bool AuthLimiter::blocked(const std::string& peer, uint64_t now_ms, int per_minute) const {
  auto it = entries_.find(peer);
  if (it == entries_.end()) return false;
  if (now_ms - it->second.window_start_ms >= kWindowMs) return false;
  return it->second.failures >= per_minute;
}

int AuthLimiter::recordFailure(const std::string& peer, uint64_t now_ms) {
  auto it = entries_.find(peer);
  if (it == entries_.end()) {
    if (entries_.size() >= max_entries_) {
      expire(now_ms);
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
  if (now_ms - it->second.window_start_ms >= kWindowMs) it->second = Entry{now_ms, 0};
  return ++it->second.failures;
}

void AuthLimiter::expire(uint64_t now_ms) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (now_ms - it->second.window_start_ms >= kWindowMs) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pgwarden::daemon
