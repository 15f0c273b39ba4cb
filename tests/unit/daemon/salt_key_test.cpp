// The salt key that keeps unknown users' made-up SCRAM challenges stable across restarts
// (salt_key.cpp): created once under daemon.state_dir and read back, an operator's file used as
// written, an inline key first, and a warning when there is no way to keep one.
#include "daemon/salt_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "daemon/config.h"

namespace pgwarden::daemon {
namespace {

// A fresh directory of its own under the test temp dir.
std::string freshDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/pgw-auth-" + name + "-" + std::to_string(::getpid());
  std::remove((dir + "/salt.key").c_str());
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

TEST(SaltKey, CreatedOnceThenReadBack) {
  const std::string dir = freshDir("create");
  config::AuthConfig auth;
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
  config::AuthConfig auth;
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
  config::AuthConfig auth;
  auth.salt_key = "inline-key-material";
  auth.salt_key_file = "/nonexistent/dir/salt.key";
  const SaltKey k = loadSaltKey(auth);
  EXPECT_EQ(k.key, "inline-key-material");
  EXPECT_TRUE(k.persistent);
  EXPECT_EQ(checkSaltKey(auth), "");
}

TEST(SaltKey, NoWayToKeepAKeyFallsBackWithAWarning) {
  config::AuthConfig auth;
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
