// `mcp.oauth`: the documented shape with a JWKS file the test writes, its defaults, and errors
// naming the key (an HMAC or none among the algorithms, a group that does not exist, a JWKS file
// that is missing or holds no usable key).
#include "mcp/oauth_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "daemon/config.h"
#include "mcp/oauth_token.h"
#include "oauth_test_keys.h"

using namespace pgwarden::daemon;

namespace {

std::string baseConfig() {
  return "upstream:\n  host: 127.0.0.1\n  user: reader\n  password: pw\n"
         "users:\n  - name: agent\n    method: trust\n    group: agents\n"
         "groups:\n  agents:\n    guards:\n      - kind: read_only\n";
}

class OAuthConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pgw_jwks_XXXXXX";
    const int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    jwks_ = tmpl;
    const nlohmann::json doc{{"keys", {pgwarden::mcp::test::TestKey::ec("k1").publicJwk()}}};
    std::ofstream(jwks_) << doc.dump();
  }
  void TearDown() override { std::remove(jwks_.c_str()); }
  std::string oauth(const std::string& extra) const {
    return baseConfig() +
           "mcp:\n  listen: 127.0.0.1:6433\n  oauth:\n"
           "    issuer: https://issuer.example\n"
           "    audience: https://db.example/mcp\n"
           "    jwks_file: " +
           jwks_ + "\n" + extra;
  }
  static std::string errorOf(const std::string& text) {
    try {
      parseConfig(text, "test.yaml");
      return "";
    } catch (const ConfigFileError& e) {
      return e.what();
    }
  }
  std::string jwks_;
};

TEST_F(OAuthConfig, AJwksFileIsFoundBesideTheConfig) {
  const std::string dir = jwks_.substr(0, jwks_.rfind('/'));
  const std::string name = jwks_.substr(jwks_.rfind('/') + 1);
  std::string text = oauth("    scopes:\n      - scope: db.read\n        group: agents\n");
  text.replace(text.find(jwks_), jwks_.size(), name);
  // Read from the config's folder, whatever the working directory.
  auto cfg = parseConfig(text, dir + "/pgwarden.yaml");
  EXPECT_EQ(cfg->mcp.oauth.jwks_file, jwks_);
  EXPECT_NE(cfg->mcp.oauth.keys, nullptr);
  EXPECT_NE(errorOf(text).find("mcp.oauth.jwks_file"), std::string::npos)
      << "beside test.yaml (the working directory) there is no such file";
}

TEST_F(OAuthConfig, TheDocumentedShapeAndItsDefaults) {
  auto cfg = parseConfig(oauth("    scopes:\n      - scope: db.read\n        group: agents\n"),
                         "test.yaml");
  const auto& o = cfg->mcp.oauth;
  EXPECT_TRUE(o.enabled());
  EXPECT_EQ(o.audience, "https://db.example/mcp");
  EXPECT_EQ(o.authorization_servers, std::vector<std::string>{"https://issuer.example"});
  EXPECT_EQ(o.algorithms, (std::vector<std::string>{"RS256", "ES256"}));
  EXPECT_EQ(o.clock_skew, std::chrono::seconds(60));
  EXPECT_EQ(o.user_claim, "sub");
  ASSERT_EQ(o.scopes.size(), 1u);
  EXPECT_EQ(o.scopes[0].group, "agents");
  ASSERT_TRUE(o.keys);
  EXPECT_NE(o.keys->find("k1"), nullptr);
}

TEST_F(OAuthConfig, ErrorsNameTheKey) {
  const std::string scopes = "    scopes:\n      - scope: db.read\n        group: agents\n";
  EXPECT_NE(
      errorOf(oauth(scopes + "    algorithms: [RS256, HS256]\n")).find("mcp.oauth.algorithms"),
      std::string::npos);
  EXPECT_NE(errorOf(oauth(scopes + "    algorithms: [none]\n")).find("\"none\" is not accepted"),
            std::string::npos);
  EXPECT_NE(errorOf(oauth("    scopes:\n      - scope: db.read\n        group: nobody\n"))
                .find("mcp.oauth.scopes[0].group"),
            std::string::npos);
  EXPECT_NE(errorOf(oauth("")).find("mcp.oauth.scopes"), std::string::npos);
  EXPECT_NE(errorOf(oauth(scopes + "    audience2: x\n")).find("audience2"), std::string::npos);
  std::ofstream(jwks_) << R"({"keys": [{"kty": "oct", "kid": "s", "k": "c2VjcmV0"}]})";
  const std::string no_key = errorOf(oauth(scopes));
  EXPECT_NE(no_key.find("mcp.oauth.jwks_file"), std::string::npos) << no_key;
  EXPECT_NE(no_key.find("has no RSA or EC signing key"), std::string::npos) << no_key;
  std::remove(jwks_.c_str());
  EXPECT_NE(errorOf(oauth(scopes)).find("mcp.oauth.jwks_file"), std::string::npos);
}

TEST_F(OAuthConfig, AJwksUrlInsteadOfTheFile) {
  const std::string head = baseConfig() +
                           "mcp:\n  listen: 127.0.0.1:6433\n  oauth:\n"
                           "    issuer: https://issuer.example\n"
                           "    audience: https://db.example/mcp\n"
                           "    scopes: [{scope: db.read, group: agents}]\n";
  auto cfg = parseConfig(
      head + "    jwks_url: https://issuer.example/certs\n    jwks_refresh: 10m\n", "test.yaml");
  EXPECT_EQ(cfg->mcp.oauth.jwks_url, "https://issuer.example/certs");
  EXPECT_EQ(cfg->mcp.oauth.jwks_refresh, std::chrono::minutes(10));
  EXPECT_EQ(cfg->mcp.oauth.keys, nullptr);  // the fetcher's, once fetched
  EXPECT_TRUE(parseConfig(head + "    jwks_url: http://127.0.0.1:8080/certs\n", "test.yaml"));
  EXPECT_NE(
      errorOf(head + "    jwks_url: http://issuer.example/certs\n").find("mcp.oauth.jwks_url"),
      std::string::npos);
  EXPECT_NE(errorOf(head + "    jwks_url: https://issuer.example/certs\n    jwks_refresh: 1s\n")
                .find("mcp.oauth.jwks_refresh"),
            std::string::npos);
  EXPECT_NE(errorOf(head).find("set either jwks_file or jwks_url"), std::string::npos);
  EXPECT_NE(
      errorOf(head + "    jwks_url: https://issuer.example/certs\n    jwks_file: " + jwks_ + "\n")
          .find("not both"),
      std::string::npos);
}

TEST_F(OAuthConfig, OAuthAloneLetsTheEndpointStart) {
  auto cfg = parseConfig(oauth("    scopes:\n      - scope: db.read\n        group: agents\n"),
                         "test.yaml");
  EXPECT_TRUE(cfg->mcp.enabled());
  EXPECT_TRUE(cfg->mcp.tokens.empty());
}

}  // namespace
