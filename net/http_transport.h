// pgwarden's one HTTP/1.1 server layer on the daemon's libuv loop, under both the MCP endpoint and
// the metrics/health endpoint: a TCP listener, one Connection per client parsed with http-parser,
// keep-alive, one request at a time per connection (pipelined bytes wait, bounded), and answers
// that may come on a later loop turn, or a streamed answer (headers now, body bytes later, until
// either side ends it). Every client is bounded in bytes (headers, body, bytes queued on a stream)
// and in time (read, write, keep-alive and linger timeouts; a stream has none), and their number
// capped. It knows no application protocol: a whole request goes up to the HttpHandler, a
// response comes down.
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
#include "net/http_request_parser.h"
#include "net/tls.h"

namespace pgwarden::net {

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

// A client the transport answered or dropped on its own, without the handler.
enum class HttpRefusal : uint8_t {
  kMalformed,     // not HTTP/1.x: 400
  kTooLarge,      // headers or body over their cap: 431 or 413
  kReadTimeout,   // no whole request within read_timeout of its start: 408, or closed if silent
  kEvicted,       // closed to make room for a newcomer at max_connections
  kOverCapacity,  // the newcomer itself, when no one could make room: 503
};

// What the transport calls. Runs on the loop thread, never from inside respond().
class HttpHandler {
 public:
  // A whole request; answer it (now or later, even from inside this call) with respond().
  virtual void onHttpRequest(uint64_t exchange, HttpRequest&& request) = 0;
  // The client of `exchange` went away before its answer: respond() will not be needed.
  virtual void onHttpAbandoned(uint64_t exchange) = 0;
  // For the handler's counters; `status` is the answer sent, 0 when the connection just closed.
  virtual void onHttpRefused(HttpRefusal /*why*/, int /*status*/) {}

 protected:
  ~HttpHandler() = default;
};

struct HttpTransportOptions {
  std::string name = "http";  // the config section, in errors and log lines ("mcp", "metrics")
  std::string listen;         // "host:port" (numeric), port 0 = any
  // At the cap, the longest-waiting connection without a request in hand (idle between requests,
  // or still sending one; then one lingering after its last answer) is closed to make room, so
  // half-open clients cannot keep out a client that sends its request at once.
  size_t max_connections = 128;
  size_t max_header_bytes = 16384;   // request line and headers
  size_t max_body_bytes = 1u << 20;  // 0: a request that declares a body is answered 413 at once
  std::chrono::milliseconds read_timeout{10000};  // a request's first byte .. its last (slowloris)
  std::chrono::milliseconds keepalive_timeout{60000};
  // An answer not taken by the client within it ends the connection (not a stream's body).
  std::chrono::milliseconds write_timeout{10000};
  // After a last answer the write side is shut and what the client still sends is read and
  // dropped (64 KiB at most) until its FIN or this long, so that closing does not reset the
  // connection and destroy the answer before the client has read it.
  std::chrono::milliseconds linger_timeout{2000};
  // Bytes a stream may have queued for a client that does not read; past it the stream is dropped.
  size_t max_stream_queue_bytes = 256 * 1024;
  // Set: every connection is TLS from its first byte (HTTPS).
  std::shared_ptr<const TlsContext> tls;
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
  // Stops listening, closes every connection; the handler is not called again. Safe to call
  // twice and before start().
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
  size_t openConnections() const;  // not yet closing
  void refused(HttpRefusal why, int status);
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
  uint64_t next_seq_ = 0;  // orders connections by when they last began to wait for a request
  std::unordered_map<Connection*, std::unique_ptr<Connection>> conns_;
  std::unordered_map<uint64_t, Connection*> exchanges_;  // answers still due
  std::vector<std::unique_ptr<Connection>> graveyard_;   // closed; freed on the next turn
  std::shared_ptr<HttpTransport> self_;
};

// Appends "HTTP/1.1 <code> <reason>", the headers with Content-Length, and the body to `out` (a
// stream: its headers only, no-cache, and Connection: close since its body ends when the
// connection does). `head_only` (the answer to HEAD): the headers as for GET, without the body.
void appendHttpResponse(std::string& out, const HttpResponse& r, bool keep_alive, bool head_only = false);

// "127.0.0.1:9930", "[::1]:9930", "localhost:9930". Numeric addresses only (no DNS on the loop).
Result<sockaddr_storage> parseHttpListenAddress(std::string_view text);

}  // namespace pgwarden::net
