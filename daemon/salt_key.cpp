// Reads, or creates once, the salt key file (see salt_key.h).
#include "daemon/salt_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "protocol/auth.h"

namespace pgwarden::daemon {

namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kMinKeyChars = 16;
constexpr size_t kMaxFileBytes = 4096;

std::string dirOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string toHex(const std::string& raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) {
    out.push_back(kHex[static_cast<unsigned char>(c) >> 4]);
    out.push_back(kHex[static_cast<unsigned char>(c) & 0xf]);
  }
  return out;
}

std::string errnoText(int err) { return std::strerror(err); }

// The key in an existing file: its first line without surrounding blanks. `error` says why
// there is none.
bool readKeyFile(const std::string& path, std::string& key, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot read " + path + ": " + errnoText(errno);
    return false;
  }
  std::string text(kMaxFileBytes, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
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

// Writes a new key under a temporary name, then links it to `path`, which fails if another
// process got there first (its key is then read instead). Returns the key, or "" with `error`.
std::string createKeyFile(const std::string& path, std::string& error) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // left by a process of the same pid that crashed mid-way
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    error = "cannot create " + path + ": " + errnoText(errno);
    return {};
  }
  const std::string key = toHex(protocol::randomBytes(kKeyBytes));
  const std::string text = key + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int write_errno = errno;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    error = "cannot write " + path + ": " + errnoText(write_errno);
    return {};
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0) {
    if (link_errno == EEXIST) {
      std::string existing;
      if (readKeyFile(path, existing, error)) return existing;
      return {};
    }
    error = "cannot create " + path + ": " + errnoText(link_errno);
    return {};
  }
  return key;
}

std::string revealedWarning(const std::string& why) {
  return "auth: " + why +
         "; unknown users' SCRAM salts will change when pgwarden restarts while real users' "
         "stay the same, which tells anyone comparing them which users exist. Make "
         "daemon.state_dir writable, or set auth.salt_key or auth.salt_key_file";
}

}  // namespace

SaltKey loadSaltKey(const AuthConfig& auth) {
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
    if (readKeyFile(path, out.key, error)) {
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

std::string checkSaltKey(const AuthConfig& auth) {
  if (!auth.salt_key.empty()) return {};
  const std::string& path = auth.salt_key_file;
  if (::access(path.c_str(), F_OK) == 0) {
    std::string key;
    std::string error;
    return readKeyFile(path, key, error) ? std::string() : revealedWarning(error);
  }
  const std::string dir = dirOf(path);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return revealedWarning(path + " does not exist and cannot be created (" + dir + ": " +
                           errnoText(errno) + ")");
  }
  return {};
}

}  // namespace pgwarden::daemon
