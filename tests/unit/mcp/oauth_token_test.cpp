// OAuth access tokens: JWTs signed by keys the test makes, checked against their JWKS for the
// signature by kid, the issuer, the audience (this resource), exp/nbf with the skew, and scopes;
// and the forgeries: alg none, an HMAC keyed by the public key, a key of the wrong type, an
// unknown kid, another key's signature.
#include "mcp/oauth_token.h"

#include <gtest/gtest.h>

#include "oauth_test_keys.h"

using namespace pgwarden::mcp;
using namespace pgwarden::config;
using pgwarden::mcp::test::forged;
using pgwarden::mcp::test::TestKey;
using Json = nlohmann::json;

namespace {

constexpr int64_t kNow = 1800000000;
const std::string kIssuer = "https://issuer.example";
const std::string kResource = "https://db.example/mcp";

class OAuthToken : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = new TestKey(TestKey::rsa("rsa-1"));
    ec_ = new TestKey(TestKey::ec("ec-1"));
    other_ = new TestKey(TestKey::rsa("rsa-1"));  // same kid, another key: a forger's
  }
  static void TearDownTestSuite() {
    delete rsa_;
    delete ec_;
    delete other_;
  }
  void SetUp() override {
    Json jwks{{"keys", Json::array({rsa_->publicJwk(), ec_->publicJwk()})}};
    auto keys = JwkSet::parse(jwks.dump());
    ASSERT_TRUE(keys.ok()) << keys.error();
    oauth_.issuer = kIssuer;
    oauth_.audience = kResource;
    oauth_.keys = *keys;
    oauth_.scopes = {{"db.write", "writers", 0}, {"db.read", "readers", 0}};
  }
  static Json claims() {
    return Json{{"iss", kIssuer},    {"aud", kResource}, {"sub", "alice"},
                {"exp", kNow + 300}, {"iat", kNow},      {"scope", "openid db.read"}};
  }
  TokenCheck check(const std::string& token) const { return checkAccessToken(oauth_, token, kNow); }

  static TestKey* rsa_;
  static TestKey* ec_;
  static TestKey* other_;
  McpOAuthConfig oauth_;
};

TestKey* OAuthToken::rsa_ = nullptr;
TestKey* OAuthToken::ec_ = nullptr;
TestKey* OAuthToken::other_ = nullptr;

TEST_F(OAuthToken, AValidRs256TokenNamesItsSubjectAndTheGroupOfItsScope) {
  const TokenCheck c = check(rsa_->sign(claims(), "RS256", "rsa-1"));
  ASSERT_EQ(c.verdict, TokenVerdict::kValid) << c.reason;
  EXPECT_EQ(c.user, "alice");
  EXPECT_EQ(c.group, "readers");
}

TEST_F(OAuthToken, AValidEs256TokenIsAccepted) {
  const TokenCheck c = check(ec_->sign(claims(), "ES256", "ec-1"));
  EXPECT_EQ(c.verdict, TokenVerdict::kValid) << c.reason;
}

TEST_F(OAuthToken, TheFirstMappedScopeTheTokenHoldsPicksTheGroup) {
  Json c = claims();
  c["scope"] = "db.read db.write";
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).group, "writers");
  c.erase("scope");
  c["scp"] = Json::array({"db.read"});
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).group, "readers");
}

TEST_F(OAuthToken, ATokenWithoutAMappedScopeIsShortOfScopeNotInvalid) {
  Json c = claims();
  c["scope"] = "openid profile";
  const TokenCheck r = check(rsa_->sign(c, "RS256", "rsa-1"));
  EXPECT_EQ(r.verdict, TokenVerdict::kInsufficientScope);
  EXPECT_TRUE(r.user.empty());
}

TEST_F(OAuthToken, TheAudienceMustNameThisResource) {
  Json c = claims();
  c["aud"] = "https://other.example/mcp";
  TokenCheck r = check(rsa_->sign(c, "RS256", "rsa-1"));
  EXPECT_EQ(r.verdict, TokenVerdict::kInvalid);
  EXPECT_EQ(r.reason, "the token's audience is not this server");
  c["aud"] = Json::array({"https://other.example/mcp", kResource});
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).verdict, TokenVerdict::kValid);
  c.erase("aud");
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).verdict, TokenVerdict::kInvalid);
}

TEST_F(OAuthToken, TheIssuerMustBeTheConfiguredOne) {
  Json c = claims();
  c["iss"] = "https://evil.example";
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).reason, "the token's issuer is not accepted");
}

TEST_F(OAuthToken, ExpiryAndNotBeforeAllowTheSkewAndNoMore) {
  Json c = claims();
  c["exp"] = kNow - 30;  // within the default 60 s skew
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).verdict, TokenVerdict::kValid);
  c["exp"] = kNow - 61;
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).reason, "the token has expired");
  c["exp"] = kNow + 300;
  c["nbf"] = kNow + 120;
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).reason, "the token is not valid yet (nbf)");
  oauth_.clock_skew = std::chrono::seconds(0);
  c["nbf"] = kNow;
  c["exp"] = kNow;
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).verdict, TokenVerdict::kInvalid);
  c.erase("exp");
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).reason, "the token has no expiry (exp)");
}

TEST_F(OAuthToken, AnotherKeysSignatureUnderTheRightKidFails) {
  EXPECT_EQ(check(other_->sign(claims(), "RS256", "rsa-1")).reason,
            "the token's signature does not verify");
  // A signed token with its claims changed after signing.
  const std::string good = rsa_->sign(claims(), "RS256", "rsa-1");
  Json c = claims();
  c["sub"] = "admin";
  const std::string tampered =
      good.substr(0, good.find('.') + 1) + test::b64url(c.dump()) + good.substr(good.rfind('.'));
  EXPECT_EQ(check(tampered).reason, "the token's signature does not verify");
}

TEST_F(OAuthToken, AnUnknownKidOrNoKidFails) {
  const TokenCheck unknown = check(rsa_->sign(claims(), "RS256", "rsa-2"));
  EXPECT_EQ(unknown.reason, "the token's key (kid) is not the issuer's");
  EXPECT_TRUE(unknown.unknown_key);  // a fetched key set is fetched again soon
  EXPECT_FALSE(check(other_->sign(claims(), "RS256", "rsa-1")).unknown_key);
  EXPECT_EQ(check(rsa_->sign(claims(), "RS256", "")).reason, "the token names no key (kid)");
}

TEST_F(OAuthToken, AlgNoneAndHmacAreRefusedBeforeAnyKeyIsTried) {
  EXPECT_EQ(check(forged({{"alg", "none"}, {"kid", "rsa-1"}}, claims(), "")).reason,
            "the token's algorithm is not accepted");
  // The classic confusion: an HMAC keyed by the published public key.
  EXPECT_EQ(
      check(forged({{"alg", "HS256"}, {"kid", "rsa-1"}}, claims(), std::string(32, 'x'))).reason,
      "the token's algorithm is not accepted");
  // An algorithm the server knows but the config does not accept.
  EXPECT_EQ(check(rsa_->sign(claims(), "RS384", "rsa-1")).reason,
            "the token's algorithm is not accepted");
}

TEST_F(OAuthToken, AnAlgorithmMustFitItsKeysType) {
  oauth_.algorithms = {"RS256", "ES256"};
  EXPECT_EQ(
      check(forged({{"alg", "ES256"}, {"kid", "rsa-1"}}, claims(), std::string(64, 'x'))).reason,
      "the token's algorithm does not fit its key");
}

TEST_F(OAuthToken, NoKeysYetRefusesEveryToken) {
  oauth_.keys = nullptr;  // a JWKS URL not fetched yet
  EXPECT_EQ(check(rsa_->sign(claims(), "RS256", "rsa-1")).reason,
            "the issuer's keys are not loaded yet");
}

TEST_F(OAuthToken, TheUserClaimIsConfigurable) {
  oauth_.user_claim = "email";
  Json c = claims();
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).reason, "the token has no email claim");
  c["email"] = "alice@example.com";
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).user, "alice@example.com");
}

TEST_F(OAuthToken, GarbageIsInvalidNeverACrash) {
  for (const char* t :
       {"", "a.b", "a.b.c", "..", "e30.e30.", "!!!.???.###", "eyJhbGciOiJSUzI1NiJ9..x"}) {
    EXPECT_EQ(check(t).verdict, TokenVerdict::kInvalid) << t;
  }
  // Members of the wrong type are refusals, not exceptions.
  EXPECT_EQ(check(forged({{"alg", 5}, {"kid", "rsa-1"}}, claims(), "x")).verdict,
            TokenVerdict::kInvalid);
  EXPECT_EQ(check(forged({{"alg", "RS256"}, {"kid", 1}}, claims(), "x")).verdict,
            TokenVerdict::kInvalid);
  Json c = claims();
  c["iss"] = 7;
  c["sub"] = Json::array();
  EXPECT_EQ(check(rsa_->sign(c, "RS256", "rsa-1")).verdict, TokenVerdict::kInvalid);
  EXPECT_FALSE(looksLikeJwt("pgw_abc"));
  EXPECT_TRUE(looksLikeJwt("a.b.c"));
}

TEST(JwkSet, ReadsSigningKeysAndLeavesOutTheRest) {
  const TestKey rsa = TestKey::rsa("k1");
  Json priv = rsa.publicJwk();
  priv["d"] = "AAAA";  // a private part: dropped, never needed to verify
  Json enc = TestKey::rsa("k2").publicJwk();
  enc["use"] = "enc";
  const Json oct{{"kty", "oct"}, {"kid", "k3"}, {"k", "c2VjcmV0"}};
  auto set = JwkSet::parse(Json{{"keys", Json::array({priv, enc, oct})}}.dump());
  ASSERT_TRUE(set.ok()) << set.error();
  EXPECT_EQ((*set)->size(), 1u);
  EXPECT_EQ((*set)->skipped(), 2u);
  EXPECT_NE((*set)->find("k1"), nullptr);
  EXPECT_EQ((*set)->find("k3"), nullptr);
}

TEST(JwkSet, RefusesSetsItCannotUse) {
  const Json key = TestKey::ec("k1").publicJwk();
  Json nokid = key;
  nokid.erase("kid");
  EXPECT_EQ(JwkSet::parse("[]").error(), "is not a JSON object");
  EXPECT_EQ(JwkSet::parse("{}").error(), "has no \"keys\" array");
  EXPECT_EQ(JwkSet::parse(R"({"keys": []})").error(), "has no RSA or EC signing key");
  EXPECT_EQ(JwkSet::parse(Json{{"keys", {nokid}}}.dump()).error(),
            "has a signing key without a kid");
  EXPECT_EQ(JwkSet::parse(Json{{"keys", {key, key}}}.dump()).error(),
            "has two keys with kid \"k1\"");
  Json broken = key;
  broken["x"] = "AA";
  EXPECT_FALSE(JwkSet::parse(Json{{"keys", {broken}}}.dump()).ok());
}

}  // namespace
