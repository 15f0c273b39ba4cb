// Fixed one-minute windows per (address, credential) and per address; eviction of the oldest
// window when a table is full. Every loop counts in the same tables, under their lock; their
// clocks may be a few milliseconds apart, so a window is over only when `now` is past its start by
// the window's length.
#include "session/auth_limiter.h"

namespace pgwarden::session {

namespace {

bool windowOver(uint64_t now_ms, uint64_t start_ms) {
  return now_ms > start_ms && now_ms - start_ms >= AuthLimiter::kWindowMs;
}

std::string credentialKey(const std::string& peer, const std::string& credential) {
  std::string key;
  key.reserve(peer.size() + 1 + credential.size());
  key.append(peer).push_back('\n');
  key.append(credential);
  return key;
}

}  // namespace

std::string AuthLimiter::userCredential(std::string_view user) {
  return "user:" + std::string(user);
}

std::string AuthLimiter::tokenCredential(std::string_view token_hash_hex) {
  return "token:" + std::string(token_hash_hex);
}

AuthLimiter::Block AuthLimiter::blocked(const std::string& peer, const std::string& credential,
                                        uint64_t now_ms, Limits limits) const {
  std::lock_guard lock(mu_);
  if (failuresIn(by_credential_, credentialKey(peer, credential), now_ms) >=
      limits.per_credential) {
    return Block::kCredential;
  }
  if (failuresIn(by_address_, peer, now_ms) >= limits.per_address) return Block::kAddress;
  return Block::kNone;
}

int AuthLimiter::recordFailure(const std::string& peer, const std::string& credential,
                               uint64_t now_ms) {
  std::lock_guard lock(mu_);
  bump(by_address_, peer, now_ms);
  return bump(by_credential_, credentialKey(peer, credential), now_ms);
}

void AuthLimiter::expire(uint64_t now_ms) {
  std::lock_guard lock(mu_);
  expireIn(by_credential_, now_ms);
  expireIn(by_address_, now_ms);
}

size_t AuthLimiter::size() const {
  std::lock_guard lock(mu_);
  return by_credential_.size() + by_address_.size();
}

int AuthLimiter::failuresIn(const Table& t, const std::string& key, uint64_t now_ms) {
  auto it = t.find(key);
  if (it == t.end() || windowOver(now_ms, it->second.window_start_ms)) return 0;
  return it->second.failures;
}

int AuthLimiter::bump(Table& t, const std::string& key, uint64_t now_ms) {
  auto it = t.find(key);
  if (it == t.end()) {
    if (t.size() >= max_entries_) {
      expireIn(t, now_ms);
      if (t.size() >= max_entries_) {
        auto oldest = t.begin();
        for (auto i = t.begin(); i != t.end(); ++i) {
          if (i->second.window_start_ms < oldest->second.window_start_ms) oldest = i;
        }
        t.erase(oldest);
      }
    }
    it = t.emplace(key, Entry{now_ms, 0}).first;
  }
  if (windowOver(now_ms, it->second.window_start_ms)) it->second = Entry{now_ms, 0};
  return ++it->second.failures;
}

void AuthLimiter::expireIn(Table& t, uint64_t now_ms) {
  for (auto it = t.begin(); it != t.end();) {
    if (windowOver(now_ms, it->second.window_start_ms)) {
      it = t.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pgwarden::session
