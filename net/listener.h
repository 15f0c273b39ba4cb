// A listening socket (TCP on one address, or the Unix socket .s.PGSQL.<port>) owned by one
// object until its close callback, uvw-style.
#pragma once

#include <uv.h>

#include <functional>
#include <string>

#include "net/net_config.h"

namespace pgwarden::net {

class Listener {
 public:
  using OnConnection = std::function<void(Listener&)>;
  Listener(uv_loop_t* loop, OnConnection on_connection);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds and listens. Returns 0 or a libuv error; `error` says what failed. `reuseport`: the
  // socket gets SO_REUSEPORT first, so other processes with it may bind the same address.
  [[nodiscard]] int listenTcp(const ListenAddress& addr, int backlog, std::string& error,
                              bool reuseport = false);
  // Takes every connection waiting in the TCP listener's accept queue now (a stopping process
  // with SO_REUSEPORT: closing the listener would reset them) and hands each descriptor to
  // `take`. Returns how many.
  size_t drainPending(const std::function<void(int fd)>& take);
  // Binds the Unix socket at `path`, replacing a stale socket file left by a dead process, then
  // sets its permission bits to `mode` and, when `group` is not empty, its group (the process's
  // umask, e.g. systemd's UMask=0077, must not decide who may connect). A mode or group that
  // cannot be applied is an error: a socket nobody can reach should not pass for a listener.
  [[nodiscard]] int listenUnix(const std::string& path, int backlog, unsigned mode,
                               const std::string& group, std::string& error);
  // Listens on a socket passed in already bound (socket activation). `name` is its address as
  // logged; the socket file of an inherited Unix socket belongs to the service manager and is
  // neither chmod-ed nor removed here.
  [[nodiscard]] int listenFd(int fd, bool is_unix, int backlog, const std::string& name,
                             std::string& error);

  void close();
  bool closed() const { return !initialized_ || closed_; }
  bool isUnix() const { return is_unix_; }
  const std::string& name() const { return name_; }
  uv_stream_t* handle() { return reinterpret_cast<uv_stream_t*>(&h_); }
  // Inside the connection callback: the descriptor libuv has accepted for the pending client
  // (uv_stream_t::accepted_fd, which libuv has no getter for), or -1. Descriptors are allocated
  // lowest first, so its number tells how close the process is to RLIMIT_NOFILE.
  int acceptedFd() const { return is_unix_ ? h_.pipe.accepted_fd : h_.tcp.accepted_fd; }

 private:
  static void onConnection(uv_stream_t* server, int status);
  static void onClose(uv_handle_t* h);

  uv_loop_t* loop_;
  OnConnection on_connection_;
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } h_;
  std::string name_;
  std::string unix_path_;  // removed on close
  bool initialized_ = false;
  bool is_unix_ = false;
  bool closing_ = false;
  bool closed_ = false;
};

// listen.so_reuseport: logs whether the kernel hands a connection queued on a closing listener to
// another process on the port (net.ipv4.tcp_migrate_req). Reads /proc once: call at start.
void noteReuseportMigration();

}  // namespace pgwarden::net
