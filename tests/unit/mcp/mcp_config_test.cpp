// The `mcp:` section: off by default, the exact shape the docs show, and errors naming the line
// and key (a bad hash, an unknown user, nobody able to connect).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "daemon/config.h"
#include "mcp/token_auth.h"
#include "protocol/auth.h"

using namespace pgwarden::daemon;
using namespace pgwarden::config;

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

namespace {

std::string keyFile(const std::string& name, const std::string& bytes, mode_t mode) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ::chmod(path.c_str(), mode);
  return path;
}

std::string withKeyFile(const std::string& path) {
  return baseConfig() +
         "mcp:\n  listen: 127.0.0.1:6433\n  trust_loopback: agent\n  handle_key_file: " + path +
         "\n";
}

std::string keyWarning(const Config& cfg) {
  for (const auto& w : cfg.warnings) {
    if (w.find("mcp.handle_key_file") != std::string::npos) return w;
  }
  return "";
}

}  // namespace

TEST(McpConfig, HandleKeyFileIsReadWholeAndNeeds32Bytes) {
  const std::string key(40, '\x07');
  auto cfg = parseConfig(withKeyFile(keyFile("handle.key", key, 0600)), "test.yaml");
  EXPECT_EQ(cfg->mcp.handle_key, key);
  EXPECT_EQ(keyWarning(*cfg), "");
  EXPECT_TRUE(parseConfig(baseConfig(), "test.yaml")->mcp.handle_key.empty());
  const std::string short_key =
      errorOf(withKeyFile(keyFile("short.key", std::string(31, 'x'), 0600)));
  EXPECT_NE(short_key.find("mcp.handle_key_file"), std::string::npos) << short_key;
  EXPECT_NE(short_key.find("at least 32"), std::string::npos) << short_key;
  const std::string missing = errorOf(withKeyFile(testing::TempDir() + "/no-such.key"));
  EXPECT_NE(missing.find("mcp.handle_key_file"), std::string::npos) << missing;
}

TEST(McpConfig, AHandleKeyFileOthersMayReadIsWarnedAbout) {
  auto cfg =
      parseConfig(withKeyFile(keyFile("shared.key", std::string(32, 'k'), 0644)), "test.yaml");
  const std::string w = keyWarning(*cfg);
  EXPECT_NE(w.find("mode 0644"), std::string::npos) << w;
  EXPECT_NE(w.find("chmod 600"), std::string::npos) << w;
}
