// Implementation of the strict YAML helpers: typed getters that fail with line and key.
#include "common/config_util.h"

#include <libpq-fe.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <limits>
#include <map>
#include <set>
#include <system_error>

namespace pgwarden::config {

namespace {

std::string join(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

// Walks every mapping once. Aliases share nodes, so a file can name far more nodes than it
// holds (or, with an anchor used inside itself, loop): both are bounded.
class DuplicateKeyWalk {
 public:
  void walk(const YAML::Node& node, const std::string& path, int depth) {
    if (++visited_ > kMaxNodes) {
      fail(node, path, "the file expands to more than " + std::to_string(kMaxNodes) +
                           " nodes (aliases used too often?)");
    }
    if (depth > kMaxDepth) {
      fail(node, path, "nested more than " + std::to_string(kMaxDepth) + " levels deep");
    }
    if (node.IsSequence()) {
      size_t i = 0;
      for (const auto& item : node) walk(item, path + "[" + std::to_string(i++) + "]", depth + 1);
      return;
    }
    if (!node.IsMap()) return;
    std::map<std::string, int> first_line;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        walk(kv.second, path, depth + 1);
        continue;
      }
      const std::string key = kv.first.Scalar();
      const std::string key_path = join(path, key.c_str());
      const auto [it, inserted] = first_line.emplace(key, lineOf(kv.first));
      if (!inserted) {
        throw ConfigError(lineOf(kv.first), key_path,
                          "duplicate key '" + key + "' at lines " + std::to_string(it->second) +
                              " and " + std::to_string(lineOf(kv.first)) +
                              ": only one would be used; remove or merge the other");
      }
      walk(kv.second, key_path, depth + 1);
    }
  }

 private:
  static constexpr size_t kMaxNodes = 1'000'000;
  static constexpr int kMaxDepth = 64;
  size_t visited_ = 0;
};

// libpq's parse error without the fragments it quotes from the string, which may be a password.
std::string withoutQuotes(const std::string& message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    if (message[i] != '"') {
      out += message[i++];
      continue;
    }
    const size_t close = message.find('"', i + 1);
    if (close == std::string::npos) {
      out += "\"...\"";
      break;
    }
    if (close - i <= 2) {
      out.append(message, i, close + 1 - i);  // a quoted single character such as "="
    } else {
      out += "\"...\"";
    }
    i = close + 1;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

void rejectDuplicateKeys(const YAML::Node& root) {
  DuplicateKeyWalk walk;
  walk.walk(root, "", 0);
}

void requireConnectionString(const YAML::Node& node, const std::string& key,
                             const std::string& dsn) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options) {
    PQconninfoFree(options);
    return;
  }
  const std::string why = error ? withoutQuotes(error) : "out of memory";
  PQfreemem(error);
  fail(node, key, "not a valid connection string (" + why + ")");
}

int lineOf(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const YAML::Mark m = node.Mark();
  return m.line >= 0 ? m.line + 1 : 0;
}

void fail(const YAML::Node& node, const std::string& key, const std::string& message) {
  throw ConfigError(lineOf(node), key, message);
}

void requireMap(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) fail(node, path, "expected a mapping");
}

void requireSequence(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) fail(node, path, "expected a list");
}

namespace {
KnownKeysObserver known_keys_observer = nullptr;
}  // namespace

void setKnownKeysObserver(KnownKeysObserver observer) { known_keys_observer = observer; }

void notifyKnownKeys(const SourceSite& site, const std::string& path,
                     const std::vector<std::string>& allowed) {
  if (known_keys_observer != nullptr) known_keys_observer(site, path, allowed);
}

void checkKeys(const YAML::Node& map, const std::string& path,
               std::initializer_list<const char*> allowed, SourceSite site) {
  if (known_keys_observer != nullptr) {
    known_keys_observer(site, path, std::vector<std::string>(allowed.begin(), allowed.end()));
  }
  requireMap(map, path);
  std::set<std::string> ok;
  for (const char* k : allowed) ok.insert(k);
  for (const auto& kv : map) {
    const std::string k = kv.first.as<std::string>();
    if (!ok.count(k)) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw ConfigError(lineOf(kv.first), join(path, k.c_str()),
                        "unknown key '" + k + "' (allowed here: " + list + ")");
    }
  }
}

std::optional<std::string> getOptionalString(const YAML::Node& map, const std::string& path,
                                             const char* key) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  if (!n.IsScalar()) fail(n, join(path, key), "expected a string");
  return n.as<std::string>();
}

std::string getString(const YAML::Node& map, const std::string& path, const char* key,
                      const std::string& fallback) {
  auto v = getOptionalString(map, path, key);
  return v ? *v : fallback;
}

int64_t getInt(const YAML::Node& map, const std::string& path, const char* key, int64_t fallback,
               int64_t min, int64_t max) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return fallback;
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v)) {
    fail(n, join(path, key), "expected an integer");
  }
  if (v < min || v > max) {
    fail(n, join(path, key),
         "value " + std::to_string(v) + " out of range [" + std::to_string(min) + ", " +
             std::to_string(max) + "]");
  }
  return v;
}

double getDouble(const YAML::Node& map, const std::string& path, const char* key,
                 double fallback) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return fallback;
  double v = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v)) {
    fail(n, join(path, key), "expected a number");
  }
  return v;
}

bool getBool(const YAML::Node& map, const std::string& path, const char* key, bool fallback) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return fallback;
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
    fail(n, join(path, key), "expected true or false");
  }
  return v;
}

std::vector<std::string> getStringList(const YAML::Node& map, const std::string& path,
                                       const char* key) {
  std::vector<std::string> out;
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return out;
  if (n.IsScalar()) {
    out.push_back(n.as<std::string>());
    return out;
  }
  if (!n.IsSequence()) fail(n, join(path, key), "expected a list of strings");
  for (const auto& item : n) {
    if (!item.IsScalar()) fail(item, join(path, key), "expected a list of strings");
    out.push_back(item.as<std::string>());
  }
  return out;
}

std::optional<std::chrono::milliseconds> parseDuration(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t start = i;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == start || i - start > 12) return std::nullopt;
  const int64_t n = std::stoll(text.substr(start, i - start));
  std::string unit = text.substr(i);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  int64_t ms = 0;
  if (unit.empty() || unit == "s") ms = n * 1000;
  else if (unit == "ms") ms = n;
  else if (unit == "m" || unit == "min") ms = n * 60'000;
  else if (unit == "h") ms = n * 3'600'000;
  else if (unit == "d") ms = n * 86'400'000;
  else return std::nullopt;
  return std::chrono::milliseconds(ms);
}

std::optional<uint64_t> parseSize(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 15) return std::nullopt;
  const uint64_t n = std::stoull(text.substr(0, i));
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "b") return n;
  if (unit == "k" || unit == "kb" || unit == "kib") return n << 10;
  if (unit == "m" || unit == "mb" || unit == "mib") return n << 20;
  if (unit == "g" || unit == "gb" || unit == "gib") return n << 30;
  return std::nullopt;
}

std::chrono::milliseconds getDuration(const YAML::Node& map, const std::string& path,
                                      const char* key, std::chrono::milliseconds fallback) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return fallback;
  if (!n.IsScalar()) fail(n, join(path, key), "expected a duration like 500ms, 10s or 5m");
  auto d = parseDuration(n.as<std::string>());
  if (!d) fail(n, join(path, key), "expected a duration like 500ms, 10s or 5m");
  return *d;
}

uint64_t getSize(const YAML::Node& map, const std::string& path, const char* key,
                 uint64_t fallback) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return fallback;
  if (!n.IsScalar()) fail(n, join(path, key), "expected a size like 65536, 64KiB or 1MiB");
  auto s = parseSize(n.as<std::string>());
  if (!s) fail(n, join(path, key), "expected a size like 65536, 64KiB or 1MiB");
  return *s;
}

Result<std::string> readSmallFile(const std::string& path, size_t max_bytes) {
  using R = Result<std::string>;
  const auto sysError = [&](const char* what) {
    return R::fail("cannot " + std::string(what) + " " + path + ": " +
                   std::generic_category().message(errno));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return sysError("open");
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return sysError("stat");
  if (!S_ISREG(st.st_mode)) return R::fail(path + " is not a regular file");
  if (uint64_t(st.st_size) > max_bytes) {
    return R::fail(path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  // One byte more than allowed tells a file that grew since fstat from one that fits exactly.
  std::string out(size_t(st.st_size) + 1, '\0');
  size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (out.size() > max_bytes) break;
      out.resize(std::min(out.size() * 2, max_bytes + 1));
    }
    const ssize_t n = ::read(fd, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read");
    if (n == 0) break;
    have += size_t(n);
  }
  if (have > max_bytes) {
    return R::fail(path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  out.resize(have);
  return out;
}

std::string readSecretFile(const YAML::Node& node, const std::string& key,
                           const std::string& file) {
  auto text = readSmallFile(file, kMaxSecretFileBytes);
  if (!text) fail(node, key, "cannot read the secret file: " + text.error());
  std::string line = std::move(*text);
  line.resize(std::min(line.size(), line.find('\n')));
  while (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

std::string resolveRelative(const std::string& config_path, const std::string& file) {
  if (file.empty() || file.front() == '/') return file;
  const auto slash = config_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : config_path.substr(0, slash);
  return dir + "/" + file;
}

}  // namespace pgwarden::config
