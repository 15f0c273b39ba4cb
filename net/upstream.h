// Reaching the upstream PostgreSQL: name resolution without blocking the loop (uv_getaddrinfo,
// cancellable when its owner goes away first), the connect itself over TCP or the server's Unix
// socket, and the one-shot connection that delivers a CancelRequest.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/net_config.h"
#include "net/stream.h"

namespace pgwarden::net {

// One pending uv_getaddrinfo at a time. The request is heap-allocated and outlives its owner if
// need be: cancel() (or the destructor) detaches it, so a late answer touches nothing.
class Resolver {
 public:
  using Callback = std::function<void(int status, const struct sockaddr* addr)>;
  explicit Resolver(uv_loop_t* loop) : loop_(loop) {}
  ~Resolver() { cancel(); }
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  [[nodiscard]] int resolve(const std::string& host, int port, Callback cb);
  void cancel();
  bool pending() const { return req_ != nullptr; }

 private:
  struct Req;
  static void onResolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res);
  uv_loop_t* loop_;
  Req* req_ = nullptr;
};

// Initializes `stream` for the upstream (a pipe when the host is a socket directory, TCP
// otherwise) so its close callback always runs. Call before connectUpstream().
[[nodiscard]] int initUpstreamStream(const UpstreamConfig& up, Stream& stream);

// Starts connecting `stream` (initialized by initUpstreamStream) to the upstream. The result
// arrives as StreamEvents::onStreamConnected; a failed name lookup calls `on_resolve_error`
// instead. Returns a libuv error if nothing could be started.
[[nodiscard]] int connectUpstream(const UpstreamConfig& up, Stream& stream, Resolver& resolver,
                                  std::function<void(int status)> on_resolve_error);

// Path of the upstream's Unix socket for a socket-directory host.
std::string upstreamSocketPath(const UpstreamConfig& up);

// Sends one CancelRequest to the upstream on a fresh connection and closes it. Owned by the
// daemon until finished() (then freed after its close callback).
class CancelForwarder final : public StreamEvents {
 public:
  CancelForwarder(uv_loop_t* loop, UpstreamConfig upstream, int32_t pid,
                  int32_t key, std::function<void(CancelForwarder*)> on_done);
  ~CancelForwarder();
  void start();
  void close();
  bool finished() const { return stream_.closed(); }
  uint64_t deadlineMs() const { return deadline_ms_; }
  void setDeadline(uint64_t ms) { deadline_ms_ = ms; }

  void onStreamData(Stream& s, const char* data, size_t len) override;
  void onStreamEnd(Stream& s, int status) override;
  void onStreamConnected(Stream& s, int status) override;
  void onStreamWritten(Stream& s, int status) override;
  void onStreamClosed(Stream& s) override;

 private:
  UpstreamConfig upstream_;
  int32_t pid_;
  int32_t key_;
  std::function<void(CancelForwarder*)> on_done_;
  Stream stream_;
  Resolver resolver_;
  uint64_t deadline_ms_ = 0;
};

}  // namespace pgwarden::net
