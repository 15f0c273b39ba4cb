// Admission of connections that have not logged in: the per-address cap first (an address over
// it never displaces anyone), then the total, where the oldest connection makes room if it has
// had long enough to log in.
#include "session/startup_limiter.h"

#include <arpa/inet.h>

#include <cstring>

namespace pgwarden::session {

StartupLimiter::Decision StartupLimiter::admit(uint64_t id, const std::string& address,
                                               uint64_t now_ms, const Limits& limits,
                                               bool clients_full) {
  Decision d;
  if (!address.empty() && limits.max_per_address > 0 &&
      countFor(address) >= limits.max_per_address) {
    d.verdict = Verdict::kAddressFull;
    return d;
  }
  const bool startup_full = entries_.size() >= limits.max_total;
  if (startup_full || clients_full) {
    const auto oldest = entries_.begin();
    if (oldest == entries_.end() || now_ms - oldest->second.since_ms < limits.evictable_after_ms) {
      d.verdict = startup_full ? Verdict::kStartupFull : Verdict::kClientsFull;
      return d;
    }
    d.evict = oldest->first;
    leave(oldest->first);
  }
  entries_.emplace(id, Entry{address, now_ms});
  if (!address.empty()) ++per_address_[address];
  return d;
}

void StartupLimiter::leave(uint64_t id) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (!it->second.address.empty()) {
    const auto a = per_address_.find(it->second.address);
    if (a != per_address_.end() && --a->second == 0) per_address_.erase(a);
  }
  entries_.erase(it);
}

size_t StartupLimiter::countFor(const std::string& address) const {
  const auto it = per_address_.find(address);
  return it == per_address_.end() ? 0 : it->second;
}

std::string StartupLimiter::addressKey(std::string_view host) {
  const std::string text(host);
  in6_addr a6{};
  if (inet_pton(AF_INET6, text.c_str(), &a6) != 1) return text;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {
    char v4[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &a6.s6_addr[12], v4, sizeof(v4)) != nullptr) return v4;
    return text;
  }
  std::memset(&a6.s6_addr[8], 0, 8);
  char v6[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, &a6, v6, sizeof(v6)) == nullptr) return text;
  return std::string(v6) + "/64";
}

}  // namespace pgwarden::session
