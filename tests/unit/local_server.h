// What a test that starts its own server needs: a free loopback port and the newest PostgreSQL
// server binaries installed here (PGW_PGBIN names others), for the tests and suites that start a
// throwaway cluster (guards, budgets, history) or a loopback service.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace pgwarden::test {

inline int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// The bin/ of the newest /usr/lib/postgresql/<version> with initdb and pg_ctl; empty when none.
inline std::filesystem::path findPgBin() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("PGW_PGBIN"); env != nullptr && *env != '\0') return env;
  fs::path best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = e.path() / "bin";
    if (fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl") && bin > best) best = bin;
  }
  return best;
}

}  // namespace pgwarden::test
