// Signing keys the OAuth unit tests make for themselves (libcjose), the JWKS that publishes
// them, and access tokens signed with them or forged in the ways an attacker would try.
#pragma once

#include <cjose/cjose.h>

#include <nlohmann/json.hpp>
#include <string>

namespace pgwarden::mcp::test {

inline std::string b64url(const std::string& bytes) {
  char* out = nullptr;
  size_t len = 0;
  cjose_err err;
  cjose_base64url_encode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &out, &len,
                         &err);
  std::string s(out, len);
  cjose_get_dealloc()(out);
  return s;
}

// A key pair with a kid; released with the object.
class TestKey {
 public:
  static TestKey rsa(const std::string& kid) {
    static const uint8_t e[] = {1, 0, 1};
    cjose_err err;
    return TestKey(cjose_jwk_create_RSA_random(2048, e, sizeof(e), &err), kid);
  }
  static TestKey ec(const std::string& kid) {
    cjose_err err;
    return TestKey(cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &err), kid);
  }
  TestKey(TestKey&& o) noexcept : jwk_(o.jwk_) { o.jwk_ = nullptr; }
  ~TestKey() {
    if (jwk_) cjose_jwk_release(jwk_);
  }
  // The public JWK as a JSON object.
  nlohmann::json publicJwk() const {
    cjose_err err;
    char* text = cjose_jwk_to_json(jwk_, false, &err);
    nlohmann::json j = nlohmann::json::parse(text);
    cjose_get_dealloc()(text);
    return j;
  }
  // A compact JWS of `claims` with this key; `alg` and `kid` go in the header as given.
  std::string sign(const nlohmann::json& claims, const std::string& alg,
                   const std::string& kid) const {
    cjose_err err;
    cjose_header_t* h = cjose_header_new(&err);
    cjose_header_set(h, CJOSE_HDR_ALG, alg.c_str(), &err);
    if (!kid.empty()) cjose_header_set(h, CJOSE_HDR_KID, kid.c_str(), &err);
    const std::string payload = claims.dump();
    cjose_jws_t* jws = cjose_jws_sign(jwk_, h, reinterpret_cast<const uint8_t*>(payload.data()),
                                      payload.size(), &err);
    std::string out;
    const char* ser = nullptr;
    if (jws && cjose_jws_export(jws, &ser, &err)) out = ser;
    if (jws) cjose_jws_release(jws);
    cjose_header_release(h);
    return out;
  }

 private:
  TestKey(cjose_jwk_t* jwk, const std::string& kid) : jwk_(jwk) {
    cjose_err err;
    cjose_jwk_set_kid(jwk_, kid.c_str(), kid.size(), &err);
  }
  cjose_jwk_t* jwk_;
};

// header.payload.signature with whatever header and signature bytes a forger picks.
inline std::string forged(const nlohmann::json& header, const nlohmann::json& claims,
                          const std::string& signature) {
  return b64url(header.dump()) + "." + b64url(claims.dump()) + "." + b64url(signature);
}

}  // namespace pgwarden::mcp::test
