// Strict config helpers: durations, sizes, unknown keys reported with line and key, and the
// bounded reading of the files a config names.
#include "common/config_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

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

// ----- readSmallFile: what a config names is read without trusting what the path leads to -----

namespace {

struct ScratchDir {
  ScratchDir() {
    char tmpl[] = "/tmp/pgw-config-util-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name, const std::string& content) const {
    const std::string p = path + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::string path;
};

std::string errorOf(const std::string& path, size_t max_bytes) {
  auto r = readSmallFile(path, max_bytes);
  EXPECT_FALSE(r.ok()) << path;
  return r.ok() ? "" : r.error();
}

}  // namespace

TEST(ReadSmallFile, ReadsARegularFileWhole) {
  ScratchDir dir;
  const std::string content("line one\nline two\0binary\n", 26);
  auto r = readSmallFile(dir.file("s", content), 64);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, content);
  auto empty = readSmallFile(dir.file("e", ""), 64);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
  auto exact = readSmallFile(dir.file("x", std::string(64, 'x')), 64);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->size(), 64u);
}

TEST(ReadSmallFile, RefusesAFileOverTheCap) {
  ScratchDir dir;
  const std::string p = dir.file("big", std::string(65, 'x'));
  EXPECT_NE(errorOf(p, 64).find("larger than 64 bytes"), std::string::npos);
}

TEST(ReadSmallFile, AFifoWithNoWriterFailsAtOnce) {
  // Opened blocking, a FIFO with no writer would stall start-up (or a reload) for ever.
  ScratchDir dir;
  const std::string p = dir.path + "/fifo";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  EXPECT_NE(errorOf(p, 64).find("not a regular file"), std::string::npos);
}

TEST(ReadSmallFile, DevicesAndDirectoriesAreNotRead) {
  // /dev/zero never ends: read to the end it would take all memory.
  EXPECT_NE(errorOf("/dev/zero", kMaxSecretFileBytes).find("not a regular file"), std::string::npos);
  ScratchDir dir;
  EXPECT_NE(errorOf(dir.path, 64).find("not a regular file"), std::string::npos);
  const std::string missing = errorOf(dir.path + "/missing", 64);
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
  EXPECT_NE(missing.find("/missing"), std::string::npos) << missing;
}

TEST(ReadSecretFile, FirstLineOfABoundedRegularFile) {
  ScratchDir dir;
  const YAML::Node node = YAML::Load("password_file: x");
  EXPECT_EQ(readSecretFile(node, "k", dir.file("a", "s3cret\r\nsecond line\n")), "s3cret");
  EXPECT_EQ(readSecretFile(node, "k", dir.file("b", "no newline")), "no newline");
  EXPECT_THROW(readSecretFile(node, "k", "/dev/zero"), ConfigError);
  EXPECT_THROW(readSecretFile(node, "k", dir.file("c", std::string(kMaxSecretFileBytes + 1, 'x'))),
               ConfigError);
  const std::string fifo = dir.path + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    (void)readSecretFile(node["password_file"], "upstream.password_file", fifo);
    FAIL() << "a FIFO was read as a secret";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "upstream.password_file");
    EXPECT_EQ(e.line(), 1);
    EXPECT_NE(std::string(e.what()).find(fifo), std::string::npos) << e.what();
  }
}
