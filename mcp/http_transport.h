// The MCP endpoint's HTTP/1.1 layer on the daemon's libuv loop: a TCP listener, one Connection per
// client parsed with http-parser, keep-alive, one request at a time per connection (pipelined
// bytes wait, bounded), and answers that may come on a later loop turn, or a streamed answer
// (headers now, body bytes later, until either side ends it). Every client is bounded in bytes
// (headers, body, bytes queued on a stream) and in time (read and keep-alive timeouts; a stream
// has none), and their number capped. It knows nothing of JSON-RPC: a whole request goes up to
// the HttpHandler, a response comes down.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/result.h"
#include "net/tls.h"

namespace pgwarden::mcp {

struct HttpRequest {
  std::string method;  // "POST", "GET", ...
  std::string path;    // the target without query or fragment
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  std::string peer_host;  // the client's address without port
  bool loopback = false;  // the client connected from 127.0.0.0/8 or ::1
  // The value of header `lower_name` ("" when absent; the first when repeated).
  std::string_view header(std::string_view lower_name) const;
  bool hasHeader(std::string_view lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;  // "" with an empty body
  std::string body;
  bool close = false;  // end the connection after it
  // A stream: the headers go now with no Content-Length, and the body is whatever send() writes
  // until finish() or either side closes (the connection ends with it).
  bool stream = false;
};

// What the transport calls. Runs on the loop thread, never from inside respond().
class HttpHandler {
 public:
  // A whole request; answer it (now or later) with respond(exchange, ...).
  virtual void onHttpRequest(uint64_t exchange, HttpRequest&& request) = 0;
  // The client of `exchange` went away before its answer: respond() will not be needed.
  virtual void onHttpAbandoned(uint64_t exchange) = 0;

 protected:
  ~HttpHandler() = default;
};

struct HttpTransportOptions {
  std::string listen;  // "host:port" (numeric), port 0 = any
  size_t max_connections = 128;
  size_t max_header_bytes = 16384;
  size_t max_body_bytes = 1u << 20;
  std::chrono::milliseconds read_timeout{10000};
  std::chrono::milliseconds keepalive_timeout{60000};
  // Bytes a stream may have queued for a client that does not read; past it the stream is dropped.
  size_t max_stream_queue_bytes = 256 * 1024;
  // Set: every connection is TLS from its first byte (HTTPS).
  std::shared_ptr<const daemon::TlsContext> tls;
};

// Keeps itself alive from start() until every handle's close callback ran, so the owner may drop
// its pointer right after close().
class HttpTransport : public std::enable_shared_from_this<HttpTransport> {
 public:
  static std::shared_ptr<HttpTransport> create(uv_loop_t* loop, HttpTransportOptions options,
                                               HttpHandler* handler);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  [[nodiscard]] Status start();
  int port() const { return port_; }
  // Answers `exchange`; nothing happens when its connection is gone. A `stream` answer keeps the
  // exchange open for send() and finish(); onHttpAbandoned tells when its client goes away.
  void respond(uint64_t exchange, HttpResponse response);
  // Writes body bytes on a stream. False when the stream is gone, or when its client has let more
  // than max_stream_queue_bytes queue up (the connection is then closed, without onHttpAbandoned).
  [[nodiscard]] bool send(uint64_t exchange, std::string_view bytes);
  // Ends a stream once what is queued on it is written (no onHttpAbandoned).
  void finish(uint64_t exchange);
  // Stops listening, closes every connection; the handler is not called again.
  void close();
  size_t connectionCount() const { return conns_.size(); }

 private:
  class Connection;
  friend class Connection;
  HttpTransport(uv_loop_t* loop, HttpTransportOptions options, HttpHandler* handler);

  static void onConnection(uv_stream_t* listener, int status);
  static void onListenerClosed(uv_handle_t* handle);
  static void onTimer(uv_timer_t* timer);
  static void onTimerClosed(uv_handle_t* handle);
  static void onSweep(uv_idle_t* idle);
  void accept();
  void connectionClosed(Connection* c);
  void maybeRelease();

  uv_loop_t* loop_;
  HttpTransportOptions options_;
  HttpHandler* handler_;
  uv_tcp_t listener_{};
  uv_timer_t timer_{};
  uv_idle_t sweep_{};
  int handles_open_ = 0;
  bool closing_ = false;
  int port_ = 0;
  uint64_t next_exchange_ = 0;
  std::unordered_map<Connection*, std::unique_ptr<Connection>> conns_;
  std::unordered_map<uint64_t, Connection*> exchanges_;  // answers still due
  std::vector<std::unique_ptr<Connection>> graveyard_;   // closed; freed on the next turn
  std::shared_ptr<HttpTransport> self_;
};

// Appends "HTTP/1.1 <code> <reason>", the headers with Content-Length, and the body to `out` (a
// stream: its headers only, no-cache, and Connection: close since its body ends when the
// connection does).
void appendHttpResponse(std::string& out, const HttpResponse& r, bool keep_alive);

}  // namespace pgwarden::mcp
