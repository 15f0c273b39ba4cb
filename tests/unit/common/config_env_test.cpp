// ${NAME} interpolation of config values: expansion, the $${ escape, the places it is refused and
// the errors that name the variable, the line and the key.
#include "common/config_env.h"

#include <gtest/gtest.h>

#include <map>

#include "common/config_util.h"

using namespace pgwarden::config;

namespace {

const std::map<std::string, std::string> kEnv = {
    {"PGPASS", "s3cret"}, {"PORT", "5433"}, {"EMPTY", ""}, {"DOLLAR", "a${B}c"}};

std::optional<std::string> lookup(const std::string& name) {
  const auto it = kEnv.find(name);
  if (it == kEnv.end()) return std::nullopt;
  return it->second;
}

YAML::Node expand(const std::string& text) {
  YAML::Node root = YAML::Load(text);
  interpolateEnv(root, lookup);
  return root;
}

// "LINE: key: message" of the error, or "" when it expands.
std::string errorOf(const std::string& text) {
  try {
    expand(text);
    return "";
  } catch (const ConfigError& e) {
    return std::to_string(e.line()) + ": " + e.key() + ": " + e.what();
  }
}

}  // namespace

TEST(ConfigEnv, ExpandsScalarValues) {
  const auto root = expand(
      "upstream:\n"
      "  password: ${PGPASS}\n"
      "  port: ${PORT}\n"
      "  dsn: \"host=x password=${PGPASS} sslmode=${EMPTY}require\"\n"
      "listen:\n"
      "  addresses: [\"127.0.0.1:${PORT}\"]\n");
  EXPECT_EQ(root["upstream"]["password"].as<std::string>(), "s3cret");
  EXPECT_EQ(root["upstream"]["port"].as<int>(), 5433);
  EXPECT_EQ(root["upstream"]["dsn"].as<std::string>(), "host=x password=s3cret sslmode=require");
  EXPECT_EQ(root["listen"]["addresses"][0].as<std::string>(), "127.0.0.1:5433");
}

TEST(ConfigEnv, OtherDollarSignsStayAndTheEscapeIsALiteral) {
  const auto root = expand(
      "a: \"SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy\"\n"
      "b: \"pa$$word $x\"\n"
      "c: \"$${PGPASS}\"\n"
      "d: ${DOLLAR}\n");
  EXPECT_EQ(root["a"].as<std::string>(), "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy");
  EXPECT_EQ(root["b"].as<std::string>(), "pa$$word $x");
  EXPECT_EQ(root["c"].as<std::string>(), "${PGPASS}");
  EXPECT_EQ(root["d"].as<std::string>(), "a${B}c") << "a value is not expanded again";
}

TEST(ConfigEnv, AnAliasedValueIsExpandedOnce) {
  const auto root = expand("a: &p ${DOLLAR}\nb: *p\n");
  EXPECT_EQ(root["a"].as<std::string>(), "a${B}c");
  EXPECT_EQ(root["b"].as<std::string>(), "a${B}c");
}

TEST(ConfigEnv, AnUnsetVariableNamesItselfTheLineAndTheKey) {
  EXPECT_EQ(errorOf("upstream:\n  host: x\n  password: ${NOPE}\n"),
            "3: upstream.password: environment variable NOPE is not set");
  EXPECT_EQ(errorOf("users:\n  - name: a\n  - name: ${NOPE}\n"),
            "3: users[1].name: environment variable NOPE is not set");
}

TEST(ConfigEnv, MalformedReferencesAreErrors) {
  for (const char* text :
       {"a: ${\n", "a: \"${}\"\n", "a: \"${1X}\"\n", "a: \"${A-B}\"\n", "a: \"x ${OPEN\"\n"}) {
    EXPECT_NE(errorOf(text).find("'$${' for a literal"), std::string::npos) << text;
  }
}

TEST(ConfigEnv, RefusedInKeysAndWhereItWouldChangeThePolicy) {
  EXPECT_NE(errorOf("\"${PORT}\": 1\n").find("a key is never expanded"), std::string::npos);
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {"groups:\n  agents:\n    guards:\n      - kind: ${PORT}\n",
            "groups.agents.guards[0].kind"},
           {"groups:\n  g:\n    lua: |\n      return \"${PORT}\"\n", "groups.g.lua"},
           {"tools:\n  - name: t\n    sql: SELECT ${PORT}\n", "tools[0].sql"},
           {"users:\n  - name: a\n    group: ${PORT}\n", "users[0].group"},
           {"users:\n  - name: a\n    method: ${PORT}\n", "users[0].method"},
           {"admin_users: [\"${PORT}\"]\n", "admin_users[0]"}}) {
    const std::string error = errorOf(text);
    EXPECT_NE(error.find(key + ": ${PORT}: environment variables are not expanded here"),
              std::string::npos)
        << text << " -> " << error;
  }
  // The escape still works there, and text without '${' is left alone.
  const auto root = expand("groups:\n  g:\n    lua: 'return \"$${x}\" .. \"$1\"'\n");
  EXPECT_EQ(root["groups"]["g"]["lua"].as<std::string>(), "return \"${x}\" .. \"$1\"");
}
