#include "mcp/oauth_token.h"

#include <cjose/cjose.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

namespace pgwarden::mcp {

namespace {

using Json = nlohmann::json;

constexpr size_t kMaxKeys = 64;
constexpr size_t kMaxClaimBytes = 256;  // a user name from a token, as history keeps it
constexpr std::string_view kAlgorithms[] = {"RS256", "RS384", "RS512", "PS256", "PS384",
                                            "PS512", "ES256", "ES384", "ES512"};

// The key type (and, for EC, the curve) an algorithm signs with.
bool keyFits(const JwkSet::Key& key, std::string_view alg) {
  if (!key.alg.empty() && key.alg != alg) return false;
  if (alg.starts_with("RS") || alg.starts_with("PS")) return key.kty == "RSA";
  if (alg == "ES256") return key.kty == "EC" && key.crv == "P-256";
  if (alg == "ES384") return key.kty == "EC" && key.crv == "P-384";
  if (alg == "ES512") return key.kty == "EC" && key.crv == "P-521";
  return false;
}

// base64url (no padding) -> bytes; nullopt when broken.
std::optional<std::string> unbase64url(std::string_view in) {
  uint8_t* out = nullptr;
  size_t len = 0;
  cjose_err err;
  if (in.empty() || !cjose_base64url_decode(in.data(), in.size(), &out, &len, &err))
    return std::nullopt;
  std::string text(reinterpret_cast<const char*>(out), len);
  cjose_get_dealloc()(out);
  return text;
}

// A string member, or "" when absent or of another type (Json::value would throw).
std::string stringOf(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<Json> jsonObject(std::string_view text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

TokenCheck invalid(std::string reason) {
  TokenCheck c;
  c.verdict = TokenVerdict::kInvalid;
  c.reason = std::move(reason);
  return c;
}

// Verifies the signature with libcjose; the payload when it holds.
std::optional<std::string> verifiedPayload(std::string_view token, const JwkSet::Key& key) {
  cjose_err err;
  cjose_jws_t* jws = cjose_jws_import(token.data(), token.size(), &err);
  if (jws == nullptr) return std::nullopt;
  std::optional<std::string> out;
  uint8_t* plain = nullptr;
  size_t plain_len = 0;
  if (cjose_jws_verify(jws, static_cast<const cjose_jwk_t*>(key.jwk), &err) &&
      cjose_jws_get_plaintext(jws, &plain, &plain_len, &err)) {
    out.emplace(reinterpret_cast<const char*>(plain), plain_len);  // owned by the jws
  }
  cjose_jws_release(jws);
  return out;
}

bool audienceNames(const Json& aud, const std::string& resource) {
  if (aud.is_string()) return aud.get<std::string>() == resource;
  if (!aud.is_array()) return false;
  return std::any_of(aud.begin(), aud.end(), [&](const Json& a) {
    return a.is_string() && a.get<std::string>() == resource;
  });
}

// RFC 9068's space-separated `scope`, or the `scp` array some issuers send.
std::vector<std::string> scopesOf(const Json& claims) {
  std::vector<std::string> out;
  if (const auto s = claims.find("scope"); s != claims.end() && s->is_string()) {
    const std::string& text = s->get_ref<const std::string&>();
    size_t i = 0;
    while (i < text.size()) {
      const size_t j = std::min(text.find(' ', i), text.size());
      if (j > i) out.push_back(text.substr(i, j - i));
      i = j + 1;
    }
  }
  if (const auto s = claims.find("scp"); s != claims.end() && s->is_array()) {
    for (const auto& v : *s) {
      if (v.is_string()) out.push_back(v.get<std::string>());
    }
  }
  return out;
}

// `exp` (required) and `nbf` (when present) against now, each with the skew.
std::optional<std::string> timeProblem(const Json& claims, int64_t now, int64_t skew) {
  const auto exp = claims.find("exp");
  if (exp == claims.end() || !exp->is_number()) return "the token has no expiry (exp)";
  if (exp->get<double>() + static_cast<double>(skew) <= static_cast<double>(now))
    return "the token has expired";
  if (const auto nbf = claims.find("nbf"); nbf != claims.end()) {
    if (!nbf->is_number()) return "the token's nbf is not a number";
    if (nbf->get<double>() - static_cast<double>(skew) > static_cast<double>(now)) {
      return "the token is not valid yet (nbf)";
    }
  }
  return std::nullopt;
}

}  // namespace

bool supportedAlgorithm(std::string_view alg) {
  return std::find(std::begin(kAlgorithms), std::end(kAlgorithms), alg) != std::end(kAlgorithms);
}

Result<std::shared_ptr<const JwkSet>> JwkSet::parse(std::string_view json) {
  const Json doc = Json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Error{"is not a JSON object"};
  const auto keys = doc.find("keys");
  if (keys == doc.end() || !keys->is_array()) return Error{"has no \"keys\" array"};
  if (keys->size() > kMaxKeys) return Error{"has more than " + std::to_string(kMaxKeys) + " keys"};
  std::shared_ptr<JwkSet> set(new JwkSet());
  for (const auto& k : *keys) {
    if (!k.is_object()) return Error{"has a key that is not an object"};
    const std::string kty = stringOf(k, "kty");
    const std::string use = stringOf(k, "use");
    if ((kty != "RSA" && kty != "EC") || (!use.empty() && use != "sig")) {
      ++set->skipped_;
      continue;
    }
    Key key;
    key.kid = stringOf(k, "kid");
    if (key.kid.empty()) return Error{"has a signing key without a kid"};
    if (set->find(key.kid) != nullptr) return Error{"has two keys with kid \"" + key.kid + "\""};
    key.kty = kty;
    key.crv = stringOf(k, "crv");
    key.alg = stringOf(k, "alg");
    // Only the public part: a private exponent in a published key set would be a mistake, and
    // verifying needs none.
    Json pub = Json::object();
    for (const char* name : {"kty", "kid", "n", "e", "crv", "x", "y"}) {
      if (const auto v = k.find(name); v != k.end()) pub[name] = *v;
    }
    const std::string text = pub.dump();
    cjose_err err;
    cjose_jwk_t* jwk = cjose_jwk_import(text.data(), text.size(), &err);
    if (jwk == nullptr) return Error{"has a key libcjose cannot read (kid \"" + key.kid + "\")"};
    key.jwk = jwk;
    set->keys_.push_back(std::move(key));
  }
  if (set->keys_.empty()) return Error{"has no RSA or EC signing key"};
  return std::shared_ptr<const JwkSet>(std::move(set));
}

JwkSet::~JwkSet() {
  for (auto& k : keys_) cjose_jwk_release(static_cast<cjose_jwk_t*>(k.jwk));
}

const JwkSet::Key* JwkSet::find(std::string_view kid) const {
  for (const auto& k : keys_) {
    if (k.kid == kid) return &k;
  }
  return nullptr;
}

bool looksLikeJwt(std::string_view token) {
  return std::count(token.begin(), token.end(), '.') == 2;
}

TokenCheck checkAccessToken(const config::McpOAuthConfig& oauth, std::string_view token,
                            int64_t now) {
  if (!looksLikeJwt(token)) return invalid("the token is not a JWT");
  if (!oauth.keys) return invalid("the issuer's keys are not loaded yet");
  const size_t dot = token.find('.');
  const auto header_text = unbase64url(token.substr(0, dot));
  const auto header = header_text ? jsonObject(*header_text) : std::nullopt;
  if (!header) return invalid("the token's header is not base64url JSON");
  const std::string alg = stringOf(*header, "alg");
  // Only the configured asymmetric algorithms: never `none`, never an HMAC keyed by a public key.
  if (std::find(oauth.algorithms.begin(), oauth.algorithms.end(), alg) == oauth.algorithms.end()) {
    return invalid("the token's algorithm is not accepted");
  }
  const auto kid = header->find("kid");
  if (kid == header->end() || !kid->is_string()) return invalid("the token names no key (kid)");
  const JwkSet::Key* key = oauth.keys->find(kid->get_ref<const std::string&>());
  if (key == nullptr) {
    TokenCheck c = invalid("the token's key (kid) is not the issuer's");
    c.unknown_key = true;
    return c;
  }
  if (!keyFits(*key, alg)) return invalid("the token's algorithm does not fit its key");
  const auto payload = verifiedPayload(token, *key);
  if (!payload) return invalid("the token's signature does not verify");
  const auto claims = jsonObject(*payload);
  if (!claims) return invalid("the token's claims are not a JSON object");
  if (stringOf(*claims, "iss") != oauth.issuer)
    return invalid("the token's issuer is not accepted");
  const auto aud = claims->find("aud");
  if (aud == claims->end() || !audienceNames(*aud, oauth.audience)) {
    return invalid("the token's audience is not this server");
  }
  if (auto problem = timeProblem(*claims, now, oauth.clock_skew.count() / 1000))
    return invalid(*problem);
  const auto user = claims->find(oauth.user_claim);
  if (user == claims->end() || !user->is_string() || user->get_ref<const std::string&>().empty()) {
    return invalid("the token has no " + oauth.user_claim + " claim");
  }
  if (user->get_ref<const std::string&>().size() > kMaxClaimBytes) {
    return invalid("the token's " + oauth.user_claim + " claim is too long");
  }
  const std::vector<std::string> held = scopesOf(*claims);
  for (const auto& s : oauth.scopes) {
    if (std::find(held.begin(), held.end(), s.scope) != held.end()) {
      TokenCheck c;
      c.verdict = TokenVerdict::kValid;
      c.user = user->get<std::string>();
      c.group = s.group;
      return c;
    }
  }
  TokenCheck c;
  c.verdict = TokenVerdict::kInsufficientScope;
  c.reason = "the token holds none of the scopes this server maps to a group";
  return c;
}

}  // namespace pgwarden::mcp
