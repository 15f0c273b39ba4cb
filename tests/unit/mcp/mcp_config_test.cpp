// The `mcp:` section: off by default, the exact shape the docs show, and errors naming the line
// and key (a bad hash, an unknown user, nobody able to connect).
#include <gtest/gtest.h>

#include "daemon/config.h"
#include "mcp/token_auth.h"
#include "protocol/auth.h"

using namespace pgwarden::daemon;

namespace {

std::string baseConfig() {
  return "upstream:\n"
         "  host: 127.0.0.1\n"
         "  user: reader\n"
         "  password: pw\n"
         "users:\n"
         "  - name: agent\n"
         "    password: \"" +
         pgwarden::protocol::makeScramVerifierWithSalt("secret", "0123456789abcdef", 4096) +
         "\"\n"
         "    group: agents\n"
         "groups:\n"
         "  agents:\n"
         "    guards:\n"
         "      - kind: read_only\n";
}

const std::string kHash = pgwarden::mcp::toHex(pgwarden::mcp::sha256("tok"));

std::string errorOf(const std::string& text) {
  try {
    parseConfig(text, "test.yaml");
    return "";
  } catch (const ConfigFileError& e) {
    return e.what();
  }
}

}  // namespace

TEST(McpConfig, OffByDefault) {
  auto cfg = parseConfig(baseConfig(), "test.yaml");
  EXPECT_FALSE(cfg->mcp.enabled());
  EXPECT_EQ(cfg->mcp.path, "/mcp");
}

TEST(McpConfig, TheDocumentedShape) {
  auto cfg = parseConfig(baseConfig() +
                             "mcp:\n"
                             "  listen: 127.0.0.1:6433\n"
                             "  path: /mcp\n"
                             "  tokens:\n"
                             "    - user: agent\n"
                             "      sha256: \"" + kHash + "\"\n",
                         "test.yaml");
  EXPECT_TRUE(cfg->mcp.enabled());
  EXPECT_EQ(cfg->mcp.listen, "127.0.0.1:6433");
  ASSERT_EQ(cfg->mcp.tokens.size(), 1u);
  EXPECT_EQ(cfg->mcp.tokens[0].user, "agent");
  EXPECT_EQ(pgwarden::mcp::userForToken(cfg->mcp.tokens, "tok"), "agent");
}

TEST(McpConfig, ErrorsNameLineAndKey) {
  const std::string bad_hash = errorOf(baseConfig() +
                                       "mcp:\n"
                                       "  listen: 127.0.0.1:6433\n"
                                       "  tokens:\n"
                                       "    - user: agent\n"
                                       "      sha256: abc\n");
  EXPECT_NE(bad_hash.find("mcp.tokens[0].sha256"), std::string::npos) << bad_hash;
  EXPECT_NE(bad_hash.find("test.yaml:"), std::string::npos) << bad_hash;
  const std::string unknown_user = errorOf(baseConfig() +
                                           "mcp:\n"
                                           "  listen: 127.0.0.1:6433\n"
                                           "  tokens:\n"
                                           "    - user: nobody\n"
                                           "      sha256: \"" + kHash + "\"\n");
  EXPECT_NE(unknown_user.find("mcp.tokens[0].user"), std::string::npos) << unknown_user;
  const std::string nobody = errorOf(baseConfig() + "mcp:\n  listen: 127.0.0.1:6433\n");
  EXPECT_NE(nobody.find("mcp.tokens"), std::string::npos) << nobody;
  const std::string unknown_key = errorOf(baseConfig() + "mcp:\n  listen: 127.0.0.1:6433\n  trust_loopback: agent\n  tokenz: []\n");
  EXPECT_NE(unknown_key.find("tokenz"), std::string::npos) << unknown_key;
  const std::string trust = errorOf(baseConfig() + "mcp:\n  listen: 127.0.0.1:6433\n  trust_loopback: ghost\n");
  EXPECT_NE(trust.find("mcp.trust_loopback"), std::string::npos) << trust;
  const std::string dup = errorOf(baseConfig() + "mcp:\n  listen: 127.0.0.1:6433\n  listen: 127.0.0.1:6434\n  trust_loopback: agent\n");
  EXPECT_NE(dup.find("listen"), std::string::npos) << dup;
}
