// Access tokens of the MCP endpoint as an OAuth 2.1 resource server: JWTs (RFC 9068) checked
// with libcjose against the issuer's keys (a JWKS) found by `kid`, then `iss`, `aud` (RFC 8707:
// it must name this server), `exp` and `nbf` with a clock skew, and the scopes, which pick the
// group. Pure: the caller passes the time, the key set and the settings.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "config/mcp_section.h"

namespace pgwarden::mcp {

// The issuer's public signing keys, read once from a JWKS document and immutable after.
class JwkSet {
 public:
  struct Key {
    std::string kid;
    std::string kty;      // "RSA" or "EC"
    std::string crv;      // EC: "P-256", "P-384", "P-521"
    std::string alg;      // the key's own "alg", when it names one
    void* jwk = nullptr;  // cjose_jwk_t*
  };
  // A JWKS ({"keys": [...]}). Keys for encryption ("use": "enc"), symmetric keys and key types
  // libcjose cannot verify with are left out and counted in skipped(); a set with no usable key,
  // a key without a kid, or two keys with one kid is an error.
  static Result<std::shared_ptr<const JwkSet>> parse(std::string_view json);
  ~JwkSet();
  JwkSet(const JwkSet&) = delete;
  JwkSet& operator=(const JwkSet&) = delete;

  const Key* find(std::string_view kid) const;
  size_t size() const { return keys_.size(); }
  size_t skipped() const { return skipped_; }

 private:
  JwkSet() = default;
  std::vector<Key> keys_;
  size_t skipped_ = 0;
};

enum class TokenVerdict { kValid, kInvalid, kInsufficientScope };

struct TokenCheck {
  TokenVerdict verdict = TokenVerdict::kInvalid;
  std::string user;   // kValid: the user claim's value
  std::string group;  // kValid: the group of the first mapped scope the token holds
  // kInvalid, kInsufficientScope: why, in words a client may read (it names no file or URL).
  std::string reason;
  bool unknown_key = false;  // the kid is not in the set: with a fetched JWKS, fetch again soon
};

// A compact JWS: three base64url parts (a static pgw_ token never has a dot).
bool looksLikeJwt(std::string_view token);
// Checks `token` at `now` (seconds since the epoch) against `oauth` and its keys.
TokenCheck checkAccessToken(const config::McpOAuthConfig& oauth, std::string_view token,
                            int64_t now);
// The algorithms `mcp.oauth.algorithms` may name: asymmetric signatures libcjose verifies.
bool supportedAlgorithm(std::string_view alg);

}  // namespace pgwarden::mcp
