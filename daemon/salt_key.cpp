// Reads, or creates once, the salt key file (see salt_key.h).
#include "daemon/salt_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/key_file.h"
#include "guards/masking.h"
#include "protocol/auth.h"

namespace pgwarden::daemon {

namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kMinKeyChars = 16;
constexpr size_t kMaxFileBytes = 4096;

std::string errnoText(int err) { return std::strerror(err); }

// The key in an existing file: its first line without surrounding blanks. `error` says why
// there is none.
bool readSaltKeyFile(const std::string& path, std::string& key, std::string& error) {
  auto read = readKeyFile(path, kMaxFileBytes);
  if (!read.ok()) {
    error = read.error();
    return false;
  }
  std::string text = std::move(*read);
  text = text.substr(0, text.find('\n'));
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) {
    text.pop_back();
  }
  if (text.size() < kMinKeyChars) {
    error = path + " holds no key (a first line of at least " + std::to_string(kMinKeyChars) +
            " characters)";
    return false;
  }
  key = std::move(text);
  return true;
}

// Writes a new key (see common/key_file.h); when another process got there first, its key is
// read instead. Returns the key, or "" with `error`.
std::string createKeyFile(const std::string& path, std::string& error) {
  const std::string key = toHex(protocol::randomBytes(kKeyBytes));
  if (Status s = writeKeyFile(path, key + "\n", false); !s.ok()) {
    error = s.error();
    return {};
  }
  std::string stored;
  if (readSaltKeyFile(path, stored, error)) return stored;
  return {};
}

std::string revealedWarning(const std::string& why) {
  return "auth: " + why +
         "; unknown users' SCRAM salts will change when pgwarden restarts while real users' "
         "stay the same, which tells anyone comparing them which users exist. Make "
         "daemon.state_dir writable, or set auth.salt_key or auth.salt_key_file";
}

}  // namespace

SaltKey loadSaltKey(const config::AuthConfig& auth) {
  SaltKey out;
  if (!auth.salt_key.empty()) {
    out.key = auth.salt_key;
    out.persistent = true;
    return out;
  }
  const std::string& path = auth.salt_key_file;
  std::string error;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (readSaltKeyFile(path, out.key, error)) {
      out.persistent = true;
      if ((st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        out.warning = "auth: " + path + " is readable by others (mode " + mode +
                      "); whoever reads it can tell unknown users' salts from real ones: "
                      "chmod 600 it";
      }
      return out;
    }
  } else if (errno == ENOENT) {
    out.key = createKeyFile(path, error);
    if (!out.key.empty()) {
      out.persistent = true;
      return out;
    }
  } else {
    error = "cannot read " + path + ": " + errnoText(errno);
  }
  out.key = protocol::randomBytes(kKeyBytes);
  out.persistent = false;
  out.warning = revealedWarning(error);
  return out;
}

std::string giveMaskKey(const config::Config& config, bool create) {
  bool needed = false;
  for (const auto& [name, group] : config.groups) {
    needed = needed || (group->masking() && !group->masking()->asNull());
  }
  if (!needed) return {};
  const std::string path = config.daemon.state_dir + "/mask.key";
  const std::string why = "masked_columns: the masking key " + path + ": ";
  if (!create) {
    if (std::string problem = keyFileProblem(path); !problem.empty()) return why + problem;
    return {};
  }
  std::string key;
  std::string error;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!readSaltKeyFile(path, key, error)) return why + error;
  } else if (errno == ENOENT) {
    key = createKeyFile(path, error);
    if (key.empty()) return why + error;
  } else {
    return why + "cannot read " + path + ": " + errnoText(errno);
  }
  for (const auto& [name, group] : config.groups) {
    if (group->masking()) group->masking()->setKey(key);
  }
  return {};
}

std::string checkSaltKey(const config::AuthConfig& auth) {
  if (!auth.salt_key.empty()) return {};
  const std::string& path = auth.salt_key_file;
  if (const std::string problem = keyFileProblem(path); !problem.empty()) {
    return revealedWarning(problem);
  }
  if (::access(path.c_str(), F_OK) != 0) return {};
  std::string key;
  std::string error;
  return readSaltKeyFile(path, key, error) ? std::string() : revealedWarning(error);
}

}  // namespace pgwarden::daemon
