// Bearer tokens: the hash the config stores, parsing of the Authorization header, and matching a
// token against every configured hash.
#include "mcp/token_auth.h"

#include <gtest/gtest.h>

#include "mcp/mcp_server.h"

using namespace pgwarden::mcp;
using namespace pgwarden::config;

TEST(TokenAuth, Sha256IsTheStandardDigest) {
  EXPECT_EQ(toHex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto d = parseSha256Hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD");
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, sha256("abc"));
  EXPECT_FALSE(parseSha256Hex("ba78"));
  EXPECT_FALSE(parseSha256Hex(std::string(64, 'g')));
}

TEST(TokenAuth, GeneratedTokensAreLongAndDistinct) {
  const std::string a = generateToken();
  const std::string b = generateToken();
  EXPECT_EQ(a.rfind("pgw_", 0), 0u);
  EXPECT_GE(a.size(), 47u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("pgw_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"), std::string::npos);
}

TEST(TokenAuth, BearerHeader) {
  EXPECT_EQ(bearerToken("Bearer abc"), "abc");
  EXPECT_EQ(bearerToken("bearer   abc  "), "abc");
  EXPECT_FALSE(bearerToken("Basic abc"));
  EXPECT_FALSE(bearerToken("Bearer "));
  EXPECT_FALSE(bearerToken("Bearerabc"));
  EXPECT_FALSE(bearerToken(""));
}

TEST(TokenAuth, UserForToken) {
  std::vector<McpToken> tokens(2);
  tokens[0].user = "agent";
  tokens[0].sha256 = sha256("t-agent");
  tokens[1].user = "core";
  tokens[1].sha256 = sha256("t-core");
  EXPECT_EQ(userForToken(tokens, "t-core"), "core");
  EXPECT_EQ(userForToken(tokens, "t-agent"), "agent");
  EXPECT_FALSE(userForToken(tokens, "t-other"));
  EXPECT_FALSE(userForToken({}, "t-agent"));
}

TEST(Origin, LoopbackAndListedOriginsOnly) {
  EXPECT_TRUE(originAllowed("http://localhost:6274", {}));
  EXPECT_TRUE(originAllowed("http://127.0.0.1", {}));
  EXPECT_TRUE(originAllowed("https://[::1]:8080", {}));
  EXPECT_FALSE(originAllowed("http://localhost.evil.example", {}));
  EXPECT_FALSE(originAllowed("https://evil.example", {}));
  EXPECT_FALSE(originAllowed("null", {}));
  EXPECT_TRUE(originAllowed("https://app.example", {"https://app.example"}));
  EXPECT_TRUE(hostAllowed("127.0.0.1:6433", {}));
  EXPECT_TRUE(hostAllowed("LOCALHOST", {}));
  EXPECT_FALSE(hostAllowed("evil.example:6433", {}));
  EXPECT_TRUE(hostAllowed("app.example", {"https://app.example"}));
}

TEST(Versions, TheThreeSupported) {
  EXPECT_TRUE(supportedProtocolVersion("2025-03-26"));
  EXPECT_TRUE(supportedProtocolVersion("2025-06-18"));
  EXPECT_TRUE(supportedProtocolVersion("2025-11-25"));
  EXPECT_FALSE(supportedProtocolVersion("2024-11-05"));
}
