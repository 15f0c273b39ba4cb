// Strict YAML helpers shared by every module that owns a config section. Unknown keys are errors,
// and every error carries the line and the dotted key path so `--check-config` can name them.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/result.h"

namespace pgwarden::config {

// Where a call is written, as std::source_location gives it; clang 14 (the fuzz build) has no
// std::source_location, and both compilers have these builtins.
struct SourceSite {
  const char* file_ = "";
  unsigned line_ = 0;
  const char* file_name() const { return file_; }
  unsigned line() const { return line_; }
  static SourceSite current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
    return SourceSite{file, line};
  }
};

// Thrown only while loading config (never on the data path). The daemon prefixes the file name.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(int line, std::string key, const std::string& message)
      : std::runtime_error(message), line_(line), key_(std::move(key)) {}
  int line() const { return line_; }          // 1-based; 0 when unknown
  const std::string& key() const { return key_; }

 private:
  int line_;
  std::string key_;
};

int lineOf(const YAML::Node& node);  // 1-based line of a node, 0 if unknown
[[noreturn]] void fail(const YAML::Node& node, const std::string& key, const std::string& message);

// Rejects any key of `map` not in `allowed`; `path` is the dotted path of the map itself.
void checkKeys(const YAML::Node& map, const std::string& path,
               std::initializer_list<const char*> allowed,
               SourceSite site = SourceSite::current());

// Told of every key check (checkKeys, and the guards' own): where it is in the source, the map's
// path and the keys it allows. Unset (and free) by default; the reference-docs test sets it to
// collect every key the loader knows, so that a key missing from pgwarden.yaml(5) fails a test.
using KnownKeysObserver = void (*)(const SourceSite& site, const std::string& path,
                                   const std::vector<std::string>& allowed);
void setKnownKeysObserver(KnownKeysObserver observer);
// For key checks other than checkKeys: tells the observer, if one is set.
void notifyKnownKeys(const SourceSite& site, const std::string& path,
                     const std::vector<std::string>& allowed);
void requireMap(const YAML::Node& node, const std::string& path);
void requireSequence(const YAML::Node& node, const std::string& path);

// Rejects a key written twice in one mapping, anywhere under `root`: yaml-cpp keeps both entries
// and every lookup finds the first, so the second would be ignored without a word. The error
// names the key and both lines. Also bounds the walk (depth, and nodes reached through aliases).
void rejectDuplicateKeys(const YAML::Node& root);

std::string getString(const YAML::Node& map, const std::string& path, const char* key,
                      const std::string& fallback);
std::optional<std::string> getOptionalString(const YAML::Node& map, const std::string& path,
                                             const char* key);
int64_t getInt(const YAML::Node& map, const std::string& path, const char* key, int64_t fallback,
               int64_t min = INT64_MIN, int64_t max = INT64_MAX);
double getDouble(const YAML::Node& map, const std::string& path, const char* key, double fallback);
bool getBool(const YAML::Node& map, const std::string& path, const char* key, bool fallback);
std::vector<std::string> getStringList(const YAML::Node& map, const std::string& path,
                                       const char* key);
// Durations: "250ms", "10s", "5m", "1h", "2d", or a bare integer meaning seconds. "0" disables.
std::chrono::milliseconds getDuration(const YAML::Node& map, const std::string& path,
                                      const char* key, std::chrono::milliseconds fallback);
// Sizes: "64KiB", "1MiB", "2GiB", "512" (bytes), also kB/MB/GB as powers of 1024.
uint64_t getSize(const YAML::Node& map, const std::string& path, const char* key,
                 uint64_t fallback);

std::optional<std::chrono::milliseconds> parseDuration(const std::string& text);
std::optional<uint64_t> parseSize(const std::string& text);

// A libpq connection string (key=value or postgresql:// URI) that libpq can parse; the error
// quotes no part of it, as it may hold a password. Throws ConfigError at `node`.
void requireConnectionString(const YAML::Node& node, const std::string& key, const std::string& dsn);

// A file a config names, relative to the config file's folder unless absolute.
std::string resolveRelative(const std::string& config_path, const std::string& file);

// Size caps of the files a config names, read with readSmallFile.
inline constexpr size_t kMaxSecretFileBytes = 64 * 1024;   // passwords, tokens, DSNs
inline constexpr size_t kMaxScriptFileBytes = 1024 * 1024;  // Lua scripts

// Reads a whole file that a config names, without trusting what the path leads to: it is opened
// non-blocking (a FIFO with no writer cannot stall start-up or a reload), must be a regular file
// (not /dev/zero, a directory or a socket) of at most `max_bytes`, and at most that many bytes are
// read even if it grows meanwhile. The error names the path and what is wrong with it.
Result<std::string> readSmallFile(const std::string& path, size_t max_bytes);

// Reads a secret from a file (first line, trailing newline stripped) through readSmallFile with
// kMaxSecretFileBytes. Throws ConfigError.
std::string readSecretFile(const YAML::Node& node, const std::string& key,
                           const std::string& file);

}  // namespace pgwarden::config
