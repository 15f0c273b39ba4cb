#include "common/key_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace pgwarden {
namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/pgw_key_file_XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  return dir ? dir : "";
}

TEST(KeyFile, CreatesOnceWithMode0600AndReadsBounded) {
  const std::string dir = tempDir();
  const std::string path = dir + "/k.key";
  EXPECT_EQ(keyFileProblem(path), "");
  ASSERT_TRUE(writeKeyFile(path, "first\n", false).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Another process's key stays: the second create leaves it and is no error.
  ASSERT_TRUE(writeKeyFile(path, "second\n", false).ok());
  EXPECT_EQ(*readKeyFile(path, 100), "first\n");
  EXPECT_EQ(*readKeyFile(path, 3), "fir");
  ASSERT_TRUE(writeKeyFile(path, "third\n", true).ok());
  EXPECT_EQ(*readKeyFile(path, 100), "third\n");
  EXPECT_EQ(::access((path + ".tmp." + std::to_string(::getpid())).c_str(), F_OK), -1);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

TEST(KeyFile, NamesWhyAFileCannotBeMade) {
  EXPECT_NE(keyFileProblem("/nonexistent/dir/k.key").find("does not exist and cannot be created"),
            std::string::npos);
  EXPECT_FALSE(readKeyFile("/nonexistent/dir/k.key", 10).ok());
  EXPECT_FALSE(writeKeyFile("/nonexistent/dir/k.key", "x", false).ok());
  EXPECT_EQ(dirOf("a.key"), ".");
  EXPECT_EQ(dirOf("/a.key"), "/");
  EXPECT_EQ(toHex(std::string("\x01\xab", 2)), "01ab");
}

}  // namespace
}  // namespace pgwarden
