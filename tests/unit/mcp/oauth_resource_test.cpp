// The RFC 9728 metadata document, where it is served and the Bearer challenges pointing to it.
#include "mcp/oauth_resource.h"

#include <gtest/gtest.h>

using namespace pgwarden::mcp;
using namespace pgwarden::config;

namespace {

McpOAuthConfig config() {
  McpOAuthConfig c;
  c.issuer = "https://issuer.example";
  c.audience = "https://db.example/mcp";
  c.authorization_servers = {"https://issuer.example"};
  c.scopes = {{"db.write", "writers", 0}, {"db.read", "readers", 0}, {"db.read", "others", 0}};
  return c;
}

TEST(OAuthResource, MetadataNamesTheResourceItsIssuersAndItsScopesOnce) {
  const Json m = protectedResourceMetadata(config());
  EXPECT_EQ(m["resource"], "https://db.example/mcp");
  EXPECT_EQ(m["authorization_servers"], Json::array({"https://issuer.example"}));
  EXPECT_EQ(m["scopes_supported"], Json::array({"db.write", "db.read"}));
  EXPECT_EQ(m["bearer_methods_supported"], Json::array({"header"}));
  EXPECT_FALSE(m.dump().find("jwks") != std::string::npos);
}

TEST(OAuthResource, TheMetadataUrlInsertsTheWellKnownPathBeforeTheResourcePath) {
  McpOAuthConfig c = config();
  EXPECT_EQ(resourceMetadataUrl(c), "https://db.example/.well-known/oauth-protected-resource/mcp");
  c.audience = "https://db.example:8443";
  EXPECT_EQ(resourceMetadataUrl(c), "https://db.example:8443/.well-known/oauth-protected-resource");
  c.audience = "https://db.example/";
  EXPECT_EQ(resourceMetadataUrl(c), "https://db.example/.well-known/oauth-protected-resource");
}

TEST(OAuthResource, ServedAtTheBareAndThePathSuffixedWellKnownPaths) {
  McpOAuthConfig c = config();
  c.audience = "https://db.example/tenant/mcp";  // behind a proxy that strips /tenant
  EXPECT_TRUE(isResourceMetadataPath(c, "/mcp", "/.well-known/oauth-protected-resource"));
  EXPECT_TRUE(isResourceMetadataPath(c, "/mcp", "/.well-known/oauth-protected-resource/mcp"));
  EXPECT_TRUE(
      isResourceMetadataPath(c, "/mcp", "/.well-known/oauth-protected-resource/tenant/mcp"));
  EXPECT_FALSE(isResourceMetadataPath(c, "/mcp", "/.well-known/oauth-protected-resource/other"));
  EXPECT_FALSE(isResourceMetadataPath(c, "/mcp", "/mcp"));
}

TEST(OAuthResource, ChallengesCarryTheMetadataUrlAndWhatIsWrong) {
  EXPECT_EQ(
      bearerChallenge(config(), "", "", true),
      "Bearer resource_metadata=\"https://db.example/.well-known/oauth-protected-resource/mcp\", "
      "scope=\"db.write db.read\"");
  EXPECT_EQ(
      bearerChallenge(config(), "invalid_token", "the token has \"expired\"", false),
      "Bearer resource_metadata=\"https://db.example/.well-known/oauth-protected-resource/mcp\", "
      "error=\"invalid_token\", error_description=\"the token has expired\"");
  EXPECT_EQ(scopeList(config()), "db.write db.read");
}

}  // namespace
