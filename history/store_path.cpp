// The file checks behind checkStorePath. SQLite in WAL mode creates `<file>-wal` and `<file>-shm`
// next to the database, so its directory must be writable even when the file exists; a jsonl
// store only appends to its file (creating it when missing).
#include "history/store_path.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace pgwarden::history {

namespace {

std::string directoryOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// "user pgwarden": who the answer is about, since it differs between root and the service.
std::string whoAmI() {
  const uid_t uid = ::geteuid();
  const passwd* pw = ::getpwuid(uid);
  return pw && pw->pw_name ? "user " + std::string(pw->pw_name) : "uid " + std::to_string(uid);
}

Status directoryProblem(const std::string& file, const std::string& dir, const char* doing) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return Status::fail(std::string("cannot ") + doing + " " + file + ": the directory " + dir +
                          " does not exist");
    }
    return Status::fail(std::string("cannot ") + doing + " " + file + ": " + dir + ": " +
                        std::strerror(err) + " (as " + whoAmI() + ")");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::fail(std::string("cannot ") + doing + " " + file + ": " + dir +
                        " is not a directory");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::fail(std::string("cannot ") + doing + " " + file + ": the directory " + dir +
                        " is not writable by " + whoAmI() + " (" + std::strerror(errno) + ")");
  }
  return {};
}

}  // namespace

Status checkStorePath(const HistoryConfig& config) {
  const bool sqlite = config.store == "sqlite";
  if (!sqlite && config.store != "jsonl") return {};
  const std::string& file = config.path;
  const std::string dir = directoryOf(file);
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    const int err = errno;
    if (err != ENOENT) {
      return Status::fail("cannot open " + file + ": " + std::strerror(err) + " (as " + whoAmI() +
                          ")");
    }
    return directoryProblem(file, dir, "create");
  }
  if (S_ISDIR(st.st_mode)) return Status::fail("cannot open " + file + ": it is a directory");
  if (::access(file.c_str(), sqlite ? (R_OK | W_OK) : W_OK) != 0) {
    return Status::fail("cannot open " + file + " for writing as " + whoAmI() + " (" +
                        std::strerror(errno) + ")");
  }
  // WAL and shared-memory files are made next to the database each time it is opened.
  if (sqlite) return directoryProblem(file, dir, "open");
  return {};
}

}  // namespace pgwarden::history
