// Strict config helpers: durations, sizes, unknown keys reported with line and key.
#include "common/config_util.h"

#include <gtest/gtest.h>

using namespace pgwarden::config;

TEST(ConfigUtil, Durations) {
  EXPECT_EQ(parseDuration("250ms")->count(), 250);
  EXPECT_EQ(parseDuration("10s")->count(), 10000);
  EXPECT_EQ(parseDuration("10")->count(), 10000);
  EXPECT_EQ(parseDuration("5m")->count(), 300000);
  EXPECT_EQ(parseDuration("1h")->count(), 3600000);
  EXPECT_FALSE(parseDuration("ten seconds"));
  EXPECT_FALSE(parseDuration("10 parsecs"));
  EXPECT_FALSE(parseDuration(""));
}

TEST(ConfigUtil, Sizes) {
  EXPECT_EQ(*parseSize("65536"), 65536u);
  EXPECT_EQ(*parseSize("64KiB"), 65536u);
  EXPECT_EQ(*parseSize("1MiB"), 1048576u);
  EXPECT_EQ(*parseSize("2 GiB"), 2147483648u);
  EXPECT_FALSE(parseSize("lots"));
}

TEST(ConfigUtil, UnknownKeyNamesLineAndPath) {
  YAML::Node root = YAML::Load("limits:\n  max_client_connections: 5\n  max_clients: 7\n");
  try {
    checkKeys(root["limits"], "limits", {"max_client_connections"});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.key(), "limits.max_clients");
    EXPECT_NE(std::string(e.what()).find("unknown key"), std::string::npos);
  }
}

TEST(ConfigUtil, TypedGettersReject) {
  YAML::Node root = YAML::Load("a: abc\nb: 12x\nc: [1, 2]\nd: 70000\n");
  EXPECT_THROW(getInt(root, "", "a", 0), ConfigError);
  EXPECT_THROW(getDuration(root, "", "b", std::chrono::milliseconds(0)), ConfigError);
  EXPECT_THROW(getString(root, "", "c", ""), ConfigError);
  EXPECT_THROW(getInt(root, "", "d", 0, 0, 65535), ConfigError);
  EXPECT_EQ(getInt(root, "", "missing", 42), 42);
}
