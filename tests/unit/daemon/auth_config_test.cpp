// The auth settings that keep unknown users indistinguishable: unknown_user_method, the salt
// key (inline, from a file, or created once under daemon.state_dir), the shape of the made-up
// SCRAM challenge, and the warning when some users' method gives them away.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "daemon/config.h"
#include "daemon/salt_key.h"
#include "protocol/auth.h"

namespace pgwarden::daemon {
namespace {

std::string scram(int iterations, const std::string& salt = "0123456789abcdef") {
  return protocol::makeScramVerifierWithSalt("pw", salt, iterations);
}

// A config with the given `auth:` body (may be empty) and users.
std::string configWith(const std::string& auth, const std::string& users,
                       const std::string& extra = "") {
  return "upstream:\n  host: 127.0.0.1\n  user: reader\n  password: pw\n" + extra +
         (auth.empty() ? "" : "auth:\n" + auth) + "users:\n" + users +
         "groups:\n  agents:\n    guards:\n      - kind: read_only\n";
}

std::string scramUser(const std::string& name, int iterations) {
  return "  - name: " + name + "\n    password: \"" + scram(iterations) + "\"\n    group: agents\n";
}

std::string md5User(const std::string& name) {
  return "  - name: " + name + "\n    password: " + protocol::md5Verifier(name, "pw") +
         "\n    group: agents\n";
}

std::string errorOf(const std::string& text) {
  try {
    parseConfig(text, "/etc/pgwarden/pgwarden.yaml");
    return "";
  } catch (const ConfigFileError& e) {
    return e.what();
  }
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

// A fresh directory of its own under the test temp dir.
std::string freshDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/pgw-auth-" + name + "-" + std::to_string(::getpid());
  std::remove((dir + "/salt.key").c_str());
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

TEST(AuthConfig, Defaults) {
  auto c = parseConfig(configWith("", scramUser("a", 4096)), "/etc/pgwarden/pgwarden.yaml");
  EXPECT_EQ(c->auth.unknown_user_method, AuthMethod::kScramSha256);
  EXPECT_EQ(c->daemon.state_dir, "/var/lib/pgwarden");
  EXPECT_EQ(c->auth.salt_key_file, "/var/lib/pgwarden/salt.key");
  EXPECT_TRUE(c->auth.salt_key.empty());
  EXPECT_EQ(c->history.path, "/var/lib/pgwarden/history.db");
  EXPECT_TRUE(c->warnings.empty()) << joined(c->warnings);
}

TEST(AuthConfig, StateDirIsRelativeToTheConfigAndCarriesTheDefaults) {
  auto c = parseConfig(configWith("", scramUser("a", 4096), "daemon:\n  state_dir: state/\n"),
                       "/etc/pgwarden/pgwarden.yaml");
  EXPECT_EQ(c->daemon.state_dir, "/etc/pgwarden/state");
  EXPECT_EQ(c->auth.salt_key_file, "/etc/pgwarden/state/salt.key");
  EXPECT_EQ(c->history.path, "/etc/pgwarden/state/history.db");
  EXPECT_NE(errorOf(configWith("", scramUser("a", 4096), "daemon:\n  state_dir: \"\"\n"))
                .find("daemon.state_dir"),
            std::string::npos);
}

TEST(AuthConfig, UnknownUserMethodValues) {
  auto c = parseConfig(configWith("  unknown_user_method: md5\n", md5User("m")), "t.yaml");
  EXPECT_EQ(c->auth.unknown_user_method, AuthMethod::kMd5);
  const std::string e = errorOf(configWith("  unknown_user_method: trust\n", md5User("m")));
  EXPECT_NE(e.find(":6: auth.unknown_user_method: unknown method 'trust'"), std::string::npos) << e;
}

TEST(AuthConfig, SaltKeyIsCheckedAndExclusiveWithTheFile) {
  auto c =
      parseConfig(configWith("  salt_key: a-long-enough-secret\n", scramUser("a", 4096)), "t.yaml");
  EXPECT_EQ(c->auth.salt_key, "a-long-enough-secret");
  EXPECT_TRUE(c->auth.salt_key_file.empty());
  EXPECT_NE(errorOf(configWith("  salt_key: short\n", scramUser("a", 4096))).find("auth.salt_key"),
            std::string::npos);
  EXPECT_NE(errorOf(configWith("  salt_key: a-long-enough-secret\n  salt_key_file: k\n",
                               scramUser("a", 4096)))
                .find("auth.salt_key_file: set either"),
            std::string::npos);
  auto f = parseConfig(configWith("  salt_key_file: keys/salt\n", scramUser("a", 4096)),
                       "/etc/pgwarden/pgwarden.yaml");
  EXPECT_EQ(f->auth.salt_key_file, "/etc/pgwarden/keys/salt");
}

TEST(AuthConfig, MadeUpScramChallengeTakesTheCommonestShape) {
  auto c = parseConfig(configWith("", scramUser("a", 10000) + scramUser("b", 10000) +
                                          scramUser("c", 4096) + md5User("m")),
                       "t.yaml");
  EXPECT_EQ(c->auth.unknown_scram_iterations, 10000);
  EXPECT_EQ(c->auth.unknown_scram_salt_len, 16u);
  auto none = parseConfig(configWith("  unknown_user_method: md5\n", md5User("m")), "t.yaml");
  EXPECT_EQ(none->auth.unknown_scram_iterations, 4096);  // PostgreSQL's default
}

TEST(AuthConfig, Md5UsersUnderScramAreNamedInAWarning) {
  auto c = parseConfig(configWith("", scramUser("a", 4096) + md5User("legacy")), "t.yaml");
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("md5 reveals which users exist: \"legacy\" uses md5"),
            std::string::npos)
      << c->warnings[0];
  // All md5 and unknown users answered with md5: nothing to tell apart.
  auto m = parseConfig(configWith("  unknown_user_method: md5\n", md5User("legacy")), "t.yaml");
  EXPECT_TRUE(m->warnings.empty()) << joined(m->warnings);
  // The other way round: SCRAM users stand out when unknown users get md5.
  auto s = parseConfig(
      configWith("  unknown_user_method: md5\n", scramUser("a", 4096) + md5User("legacy")),
      "t.yaml");
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_NE(s->warnings[0].find("\"a\" gets the SCRAM-SHA-256 challenge"), std::string::npos)
      << s->warnings[0];
}

TEST(SaltKey, CreatedOnceThenReadBack) {
  const std::string dir = freshDir("create");
  AuthConfig auth;
  auth.salt_key_file = dir + "/salt.key";
  EXPECT_EQ(checkSaltKey(auth), "");
  EXPECT_NE(::access(auth.salt_key_file.c_str(), F_OK), 0) << "the check creates nothing";
  const SaltKey first = loadSaltKey(auth);
  EXPECT_TRUE(first.persistent);
  EXPECT_EQ(first.warning, "");
  EXPECT_EQ(first.key.size(), 64u);
  EXPECT_EQ(first.key.find_first_not_of("0123456789abcdef"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(auth.salt_key_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const SaltKey second = loadSaltKey(auth);  // the next start
  EXPECT_EQ(second.key, first.key);
  EXPECT_TRUE(second.persistent);
}

TEST(SaltKey, AnOperatorsFileIsUsedAsWritten) {
  const std::string dir = freshDir("given");
  AuthConfig auth;
  auth.salt_key_file = dir + "/salt.key";
  { std::ofstream(auth.salt_key_file) << "operator-chosen-key-material\n"; }
  ::chmod(auth.salt_key_file.c_str(), 0600);
  const SaltKey k = loadSaltKey(auth);
  EXPECT_EQ(k.key, "operator-chosen-key-material");
  EXPECT_EQ(k.warning, "");
  ::chmod(auth.salt_key_file.c_str(), 0644);
  EXPECT_NE(loadSaltKey(auth).warning.find("readable by others (mode 0644)"), std::string::npos);
  { std::ofstream(auth.salt_key_file) << "short\n"; }
  const SaltKey bad = loadSaltKey(auth);
  EXPECT_FALSE(bad.persistent);
  EXPECT_NE(bad.warning.find("holds no key"), std::string::npos) << bad.warning;
}

TEST(SaltKey, InlineKeyWins) {
  AuthConfig auth;
  auth.salt_key = "inline-key-material";
  auth.salt_key_file = "/nonexistent/dir/salt.key";
  const SaltKey k = loadSaltKey(auth);
  EXPECT_EQ(k.key, "inline-key-material");
  EXPECT_TRUE(k.persistent);
  EXPECT_EQ(checkSaltKey(auth), "");
}

TEST(SaltKey, NoWayToKeepAKeyFallsBackWithAWarning) {
  AuthConfig auth;
  auth.salt_key_file = "/nonexistent/dir/salt.key";
  const SaltKey k = loadSaltKey(auth);
  EXPECT_FALSE(k.persistent);
  EXPECT_EQ(k.key.size(), 32u);
  EXPECT_NE(k.warning.find("cannot create /nonexistent/dir/salt.key"), std::string::npos)
      << k.warning;
  EXPECT_NE(k.warning.find("which users exist"), std::string::npos);
  EXPECT_NE(checkSaltKey(auth).find("cannot be created"), std::string::npos);
}

}  // namespace
}  // namespace pgwarden::daemon
