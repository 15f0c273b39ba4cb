// Bounded reads and once-only creation of the key files in daemon.state_dir (see key_file.h).
#include "common/key_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pgwarden {

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

Result<std::string> readKeyFile(const std::string& path, size_t max_bytes) {
  using R = Result<std::string>;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return R::fail("cannot read " + path + ": " + std::strerror(errno));
  std::string text(max_bytes, '\0');
  size_t got = 0;
  int read_errno = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) read_errno = errno;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (read_errno != 0) return R::fail("cannot read " + path + ": " + std::strerror(read_errno));
  text.resize(got);
  return text;
}

Status writeKeyFile(const std::string& path, const std::string& text, bool replace) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // left by a process of the same pid that crashed mid-way
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::fail("cannot create " + path + ": " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int write_errno = errno;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    return Status::fail("cannot write " + path + ": " + std::strerror(write_errno));
  }
  const int moved =
      replace ? ::rename(tmp.c_str(), path.c_str()) : ::link(tmp.c_str(), path.c_str());
  const int move_errno = errno;
  if (!replace || moved != 0) ::unlink(tmp.c_str());
  if (moved != 0 && !(move_errno == EEXIST && !replace)) {
    return Status::fail("cannot create " + path + ": " + std::strerror(move_errno));
  }
  return {};
}

std::string keyFileProblem(const std::string& path) {
  if (::access(path.c_str(), F_OK) == 0) {
    if (::access(path.c_str(), R_OK) != 0)
      return "cannot read " + path + ": " + std::strerror(errno);
    return {};
  }
  if (errno != ENOENT) return "cannot read " + path + ": " + std::strerror(errno);
  const std::string dir = dirOf(path);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return path + " does not exist and cannot be created (" + dir + ": " + std::strerror(errno) +
           ")";
  }
  return {};
}

}  // namespace pgwarden
