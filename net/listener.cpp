// Listener: bind/listen for TCP (IPv6 sockets are IPv6-only so "::" and "0.0.0.0" can both be
// bound), the Unix socket (listen.unix_socket_mode, 0777 by default like PostgreSQL's;
// authentication still applies), and sockets inherited from systemd.
#include "net/listener.h"

#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace pgwarden::net {

namespace {

// True when a live process answers on the socket file at `path` (run before the loop starts,
// so a blocking connect here is fine).
bool socketInUse(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
  const bool in_use = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  ::close(fd);
  return in_use;
}

// The group's id, looked up before the loop starts (NSS may block, which is fine here).
// Returns false with `error` set when the group does not exist.
bool groupId(const std::string& group, gid_t& gid, std::string& error) {
  std::vector<char> buf(16384);
  struct group g {};
  struct group* found = nullptr;
  const int rc = ::getgrnam_r(group.c_str(), &g, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    error = "listen.unix_socket_group: no group \"" + group + "\"" +
            (rc != 0 ? std::string(" (") + std::strerror(rc) + ")" : "");
    return false;
  }
  gid = found->gr_gid;
  return true;
}

}  // namespace

Listener::Listener(uv_loop_t* loop, OnConnection on_connection)
    : loop_(loop), on_connection_(std::move(on_connection)) {
  std::memset(&h_, 0, sizeof(h_));
}

Listener::~Listener() = default;

int Listener::listenTcp(const ListenAddress& addr, int backlog, std::string& error,
                        bool reuseport) {
  sockaddr_storage ss{};
  const bool v6 = addr.host.find(':') != std::string::npos;
  int rc = v6 ? uv_ip6_addr(addr.host.c_str(), addr.port, reinterpret_cast<sockaddr_in6*>(&ss))
              : uv_ip4_addr(addr.host.c_str(), addr.port, reinterpret_cast<sockaddr_in*>(&ss));
  name_ = (v6 ? "[" + addr.host + "]" : addr.host) + ":" + std::to_string(addr.port);
  if (rc != 0) {
    error = "invalid address " + name_;
    return rc;
  }
  rc = uv_tcp_init(loop_, &h_.tcp);
  if (rc != 0) {
    error = std::string("socket: ") + uv_strerror(rc);
    return rc;
  }
  initialized_ = true;
  h_.tcp.data = this;
  if (reuseport) {
    // libuv (before 1.49) has no flag for it: the socket is made here, given SO_REUSEPORT, and
    // opened as the handle's; uv_tcp_bind then binds it (and sets SO_REUSEADDR as usual).
    const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int on = 1;
    if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
      rc = uv_translate_sys_error(errno);
      if (fd >= 0) ::close(fd);
      error = "cannot set SO_REUSEPORT for " + name_ + ": " + uv_strerror(rc);
      return rc;
    }
    rc = uv_tcp_open(&h_.tcp, fd);
    if (rc != 0) {
      ::close(fd);
      error = "cannot open a socket for " + name_ + ": " + uv_strerror(rc);
      return rc;
    }
  }
  rc = uv_tcp_bind(&h_.tcp, reinterpret_cast<sockaddr*>(&ss), v6 ? UV_TCP_IPV6ONLY : 0);
  if (rc == 0) rc = uv_listen(handle(), backlog, &Listener::onConnection);
  if (rc != 0) error = "cannot listen on " + name_ + ": " + uv_strerror(rc);
  return rc;
}

int Listener::listenUnix(const std::string& path, int backlog, unsigned mode,
                         const std::string& group, std::string& error) {
  name_ = path;
  is_unix_ = true;
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    error = "socket path too long: " + path;
    return UV_ENAMETOOLONG;
  }
  gid_t gid = static_cast<gid_t>(-1);
  if (!group.empty() && !groupId(group, gid, error)) return UV_EINVAL;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      error = path + " exists and is not a socket";
      return UV_EEXIST;
    }
    if (socketInUse(path)) {
      error = "another process is listening on " + path;
      return UV_EADDRINUSE;
    }
    ::unlink(path.c_str());
  }
  int rc = uv_pipe_init(loop_, &h_.pipe, 0);
  if (rc != 0) {
    error = std::string("socket: ") + uv_strerror(rc);
    return rc;
  }
  initialized_ = true;
  h_.pipe.data = this;
  rc = uv_pipe_bind(&h_.pipe, path.c_str());
  if (rc == 0) {
    unix_path_ = path;
    // Group first: chown may clear bits chmod set. Both before listen(), so no client ever sees
    // the socket with the umask's mode.
    if (gid != static_cast<gid_t>(-1) && ::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
      const int err = errno;
      error = "cannot set group " + group + " on " + path + ": " + std::strerror(err) +
              " (the process must be a member of the group)";
      return -err;
    }
    if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
      const int err = errno;
      char octal[8];
      std::snprintf(octal, sizeof octal, "%04o", mode);
      error = std::string("cannot set mode ") + octal + " on " + path + ": " + std::strerror(err);
      return -err;
    }
    rc = uv_listen(handle(), backlog, &Listener::onConnection);
  }
  if (rc != 0) error = "cannot listen on " + path + ": " + uv_strerror(rc);
  return rc;
}

int Listener::listenFd(int fd, bool is_unix, int backlog, const std::string& name,
                       std::string& error) {
  is_unix_ = is_unix;
  name_ = name.empty() ? "fd " + std::to_string(fd) : name;
  int rc = is_unix ? uv_pipe_init(loop_, &h_.pipe, 0) : uv_tcp_init(loop_, &h_.tcp);
  if (rc != 0) {
    error = std::string("socket: ") + uv_strerror(rc);
    return rc;
  }
  initialized_ = true;
  h_.tcp.data = this;
  rc = is_unix ? uv_pipe_open(&h_.pipe, fd) : uv_tcp_open(&h_.tcp, fd);
  if (rc == 0) rc = uv_listen(handle(), backlog, &Listener::onConnection);
  if (rc != 0) error = "cannot listen on inherited socket " + name_ + ": " + uv_strerror(rc);
  return rc;
}

size_t Listener::drainPending(const std::function<void(int fd)>& take) {
  if (!initialized_ || closing_ || is_unix_) return 0;
  uv_os_fd_t listen_fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&h_), &listen_fd) != 0) return 0;
  size_t n = 0;
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;  // EAGAIN: nothing waits; anything else: nothing more to take either
    }
    ++n;
    take(fd);
  }
  return n;
}

void Listener::close() {
  if (!initialized_ || closing_) return;
  closing_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&h_), &Listener::onClose);
  if (!unix_path_.empty()) {
    ::unlink(unix_path_.c_str());
    unix_path_.clear();
  }
}

void Listener::onConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<Listener*>(server->data);
  if (status != 0) {
    // EMFILE and friends: the pending connection stays in the backlog; say so once per event.
    spdlog::warn("accept on {} failed: {}", self->name_, uv_strerror(status));
    return;
  }
  if (!self->closing_) self->on_connection_(*self);
}

void Listener::onClose(uv_handle_t* h) {
  auto* self = static_cast<Listener*>(h->data);
  self->closed_ = true;
}

// With SO_REUSEPORT, a connection the kernel queues on this process's listener in the instant
// between its last accept and its close (SIGTERM) is reset, unless net.ipv4.tcp_migrate_req=1
// (Linux 5.14) hands it to another listener of the port.
void noteReuseportMigration() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_migrate_req");
  int value = -1;
  if (!(f >> value)) {
    spdlog::info("listen.so_reuseport: this kernel has no net.ipv4.tcp_migrate_req (Linux 5.14 "
                 "and later): a connection arriving just as a process closes its listener may "
                 "be reset");
  } else if (value == 0) {
    spdlog::warn("listen.so_reuseport: net.ipv4.tcp_migrate_req is 0: a connection arriving "
                 "just as this process closes its listener (SIGTERM) may be reset; "
                 "`sysctl -w net.ipv4.tcp_migrate_req=1` hands such connections to the other "
                 "processes on the port (docs/operations.md)");
  }
}

}  // namespace pgwarden::net
