// Connections that have not logged in yet (startup packet, TLS, password exchange), tracked per
// source address and in arrival order, so that unauthenticated clients cannot take every client
// slot: caps in total and per address, and the oldest one is closed when a newcomer needs room.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

namespace pgwarden::session {

class StartupLimiter {
 public:
  struct Limits {
    size_t max_total = 64;          // limits.startupCap()
    size_t max_per_address = 16;    // 0: no per-address cap
    // A connection still starting up after this long may be closed to make room; a younger
    // one is left alone (a login in progress takes milliseconds), and the newcomer is refused.
    uint64_t evictable_after_ms = 1000;
  };

  enum class Verdict {
    kAdmit,          // tracked from now on (after closing `evict`, when set)
    kAddressFull,    // its address already has max_per_address connections starting up
    kStartupFull,    // max_total connections are starting up, none of them old enough to close
    kClientsFull,    // the caller's client slots are full, and no connection is old enough
  };
  struct Decision {
    Verdict verdict = Verdict::kAdmit;
    uint64_t evict = 0;  // a connection to close first (already forgotten here); 0: none
  };

  // A new connection `id` (ids only grow) from `address` (its addressKey; "" for the Unix socket,
  // which no per-address cap applies to). `clients_full`: the caller has no client slot left
  // unless one is freed.
  Decision admit(uint64_t id, const std::string& address, uint64_t now_ms, const Limits& limits,
                 bool clients_full);
  // The connection logged in, or closed. Unknown ids are ignored.
  void leave(uint64_t id);

  size_t size() const { return entries_.size(); }
  size_t countFor(const std::string& address) const;

  // The address a cap counts under: an IPv4 address as it is, an IPv6 address by its /64 (one
  // host usually holds a whole /64), anything else unchanged.
  static std::string addressKey(std::string_view host);

 private:
  struct Entry {
    std::string address;
    uint64_t since_ms = 0;
  };
  std::map<uint64_t, Entry> entries_;  // by id: the first entry is the oldest connection
  std::unordered_map<std::string, size_t> per_address_;
};

}  // namespace pgwarden::session
