// Per-peer-address limit on failed logins: after N failures within a minute an address is
// refused until the minute is over. Bounded: the table forgets the oldest addresses when full.
// Shared by every loop: each call takes its lock.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pgwarden::daemon {

class AuthLimiter {
 public:
  explicit AuthLimiter(size_t max_entries = 10000) : max_entries_(max_entries) {}

  // True when `peer` has used up its failures for the current window.
  bool blocked(const std::string& peer, uint64_t now_ms, int per_minute) const;
  // Counts one failure; returns the count in the current window.
  int recordFailure(const std::string& peer, uint64_t now_ms);
  // Drops windows that are over (janitor).
  void expire(uint64_t now_ms);
  size_t size() const;

  static constexpr uint64_t kWindowMs = 60000;

 private:
  struct Entry {
    uint64_t window_start_ms = 0;
    int failures = 0;
  };
  void expireLocked(uint64_t now_ms);

  mutable std::mutex mu_;
  size_t max_entries_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace pgwarden::daemon
