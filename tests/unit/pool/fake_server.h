// The "server" end for ServerConnection tests: a Unix socket in a temporary directory, named as
// PostgreSQL names its own (.s.PGSQL.<port>), that the test reads and writes by hand between
// turns of the loop. No PostgreSQL runs: the test plays it frame by frame.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "protocol/messages.h"

namespace pgwarden::daemon::test {

// Cuts the first whole v3 message off `in`: its type and body. False until one is all there.
inline bool takeFrame(std::string& in, char& type, std::string& body) {
  if (in.size() < 5) return false;
  const size_t len = protocol::readU32(in.data() + 1);
  if (in.size() < len + 1) return false;
  type = in[0];
  body = in.substr(5, len - 4);
  in.erase(0, len + 1);
  return true;
}

class FakeServer {
 public:
  static constexpr int kPort = 5999;

  FakeServer() {
    char tmpl[] = "/tmp/pgw-pool-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return;
    dir_ = tmpl;
    path_ = dir_ + "/.s.PGSQL." + std::to_string(kPort);
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 8) != 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
    }
  }
  ~FakeServer() {
    hangUp();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (!path_.empty()) unlink(path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  bool listening() const { return listen_fd_ >= 0; }
  const std::string& dir() const { return dir_; }

  // Takes a pending connection, if any (never waits). True once one is held.
  bool accept() {
    if (fd_ < 0 && listen_fd_ >= 0) fd_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK);
    return fd_ >= 0;
  }
  bool connected() const { return fd_ >= 0; }

  // Writes what it can of the queued bytes and reads whatever the client has sent (never waits).
  void pump() {
    if (fd_ < 0) return;
    while (!out_.empty()) {
      const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) break;
      out_.erase(0, static_cast<size_t>(n));
    }
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0) return;
      in_.append(buf, static_cast<size_t>(n));
    }
  }

  // The startup packet, once it is all here.
  bool takeStartup(protocol::StartupPacket& out) {
    size_t used = 0;
    std::string error;
    if (protocol::parseStartup(in_, out, used, error) != protocol::StartupStatus::kPacket) {
      return false;
    }
    in_.erase(0, used);
    return true;
  }

  // The next whole message the client sent: its type and body.
  bool takeMessage(char& type, std::string& body) { return takeFrame(in_, type, body); }

  // Queues `bytes` for the client; pump() writes them as the socket takes them.
  void send(std::string_view bytes) {
    out_.append(bytes);
    pump();
  }
  bool allSent() const { return out_.empty(); }

  // The server goes away: the connection is closed without a word.
  void hangUp() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  std::string dir_;
  std::string path_;
  int listen_fd_ = -1;
  int fd_ = -1;
  std::string in_;
  std::string out_;
};

}  // namespace pgwarden::daemon::test
