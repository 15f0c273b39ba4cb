// The credentials an HTTP endpoint may ask for (the metrics endpoint's /metrics): one bearer token
// or one "user:password" pair, compared in constant time. Pure; no socket.
#pragma once

#include <string>
#include <string_view>

namespace pgwarden::net {

struct HttpAuth {
  enum class Kind { kNone, kBearer, kBasic };
  Kind kind = Kind::kNone;
  std::string secret;  // bearer: the token; basic: "user:password"
};

// True when the Authorization header value satisfies `auth`. Constant time in the secret.
bool authorized(const HttpAuth& auth, std::string_view authorization_header);

}  // namespace pgwarden::net
