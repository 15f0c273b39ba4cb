// Failed logins per (peer address, credential) per minute: a credential that keeps failing from
// an address is refused there until its minute is over, while other credentials from the same
// address go on working (on a host where every agent connects from 127.0.0.1, one broken agent
// must not lock the others out). A much higher ceiling per address still stops one address from
// guessing through many credentials. Credentials are keyed by what names them, never by a secret:
// a SQL login by its user name, an MCP bearer token by a hash of it. Bounded: each table forgets
// its oldest windows when full. Shared by every loop: each call takes its lock.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace pgwarden::session {

class AuthLimiter {
 public:
  explicit AuthLimiter(size_t max_entries = 10000) : max_entries_(max_entries) {}

  struct Limits {
    int per_credential = 20;  // auth.failed_attempts_per_minute
    int per_address = 500;    // auth.failed_attempts_per_address
  };
  enum class Block : uint8_t {
    kNone,
    kCredential,  // this credential failed too often from this address
    kAddress,     // this address failed too often, whatever the credential
  };

  // The credential keys: a SQL login's user name; an MCP token's hash (hex), never the token.
  static std::string userCredential(std::string_view user);
  static std::string tokenCredential(std::string_view token_hash_hex);

  // Whether an attempt with `credential` from `peer` is refused for the current window.
  Block blocked(const std::string& peer, const std::string& credential, uint64_t now_ms,
                Limits limits) const;
  // Counts one failure of `credential` from `peer`; returns the credential's count in its window.
  int recordFailure(const std::string& peer, const std::string& credential, uint64_t now_ms);
  // Drops windows that are over (janitor).
  void expire(uint64_t now_ms);
  // Windows held, credentials and addresses together.
  size_t size() const;

  static constexpr uint64_t kWindowMs = 60000;

 private:
  struct Entry {
    uint64_t window_start_ms = 0;
    int failures = 0;
  };
  using Table = std::unordered_map<std::string, Entry>;
  // The failures in `key`'s current window (0 when none or over).
  static int failuresIn(const Table& t, const std::string& key, uint64_t now_ms);
  int bump(Table& t, const std::string& key, uint64_t now_ms);
  static void expireIn(Table& t, uint64_t now_ms);

  mutable std::mutex mu_;
  size_t max_entries_;
  Table by_credential_;  // key: peer, '\n', credential
  Table by_address_;
};

}  // namespace pgwarden::session
