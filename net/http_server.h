// The metrics and health endpoint: a deliberately small HTTP/1.x server on the daemon's libuv
// loop serving GET/HEAD /metrics, /healthz and /readyz. One request per connection (the response
// says Connection: close); every client is bounded in bytes and in time, and their number capped.
#pragma once

#include <uv.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "metrics/metrics.h"

namespace pgwarden::daemon::metrics {

struct HttpAuth {
  enum class Kind { kNone, kBearer, kBasic };
  Kind kind = Kind::kNone;
  std::string secret;  // bearer: the token; basic: "user:password"
};

struct HttpServerOptions {
  std::string listen = "127.0.0.1:9930";           // host:port, [v6]:port; port 0 = any
  // Beyond it, the oldest client without a complete request is closed to make room (then
  // one already answered); only when every client is being answered is a new one closed at once.
  size_t max_clients = 64;
  size_t max_request_bytes = 8192;                 // request line + headers
  std::chrono::milliseconds read_timeout{10000};   // accept .. end of headers (slowloris)
  std::chrono::milliseconds write_timeout{10000};  // response handed to the kernel
  std::chrono::milliseconds linger_timeout{2000};  // after the response, wait for the FIN
  HttpAuth auth;  // guards /metrics only; /healthz and /readyz stay open for probes
};

// Parses the `metrics:` section (absent node: defaults). Keys: listen, max_clients,
// read_timeout, bearer_token_file, basic_auth_file ("user:password" on the first line).
// Throws config::ConfigError with the line and dotted key.
HttpServerOptions parseMetricsConfig(const YAML::Node& node);

// "127.0.0.1:9930", "[::1]:9930", "localhost:9930". Numeric addresses only (no DNS on the loop).
Result<sockaddr_storage> parseListenAddress(std::string_view text);

// ----- request parsing (pure; exposed for tests) -----------------------------------------------

struct HttpRequest {
  std::string method;
  std::string target;  // as sent
  std::string path;    // target without query or fragment
  std::string accept;
  std::string authorization;
  bool has_body = false;  // Content-Length > 0 or Transfer-Encoding present
};

enum class ParseStatus { kIncomplete, kComplete, kBad };

struct ParseResult {
  ParseStatus status = ParseStatus::kIncomplete;
  HttpRequest request;  // valid when kComplete
  std::string error;    // why, when kBad
};

// Looks at everything received so far. Rejects as early as the bytes allow: a method that is not
// a token fails on its first byte, a bad request line as soon as it ends, and more than
// `max_bytes` without the blank line that ends the headers fails at once.
ParseResult parseHttpRequest(std::string_view data, size_t max_bytes);

// True when the Authorization header value satisfies `auth`. Constant time in the secret.
bool authorized(const HttpAuth& auth, std::string_view authorization_header);

// ----- the server ------------------------------------------------------------------------------

struct Readiness {
  bool ready = false;
  std::string reason;  // one short line for the 503 body, e.g. "upstream unreachable"
};
using ReadinessCheck = std::function<Readiness()>;

// Owns its listener and its clients' handles. It keeps itself alive from start() until every
// handle's close callback has run, so the owner may drop its pointer right after close().
// All methods run on the loop thread.
class HttpServer : public std::enable_shared_from_this<HttpServer> {
 public:
  // `metrics` must outlive the server; `readiness` runs on the loop for each GET /readyz.
  static std::shared_ptr<HttpServer> create(uv_loop_t* loop, Metrics& metrics,
                                            HttpServerOptions options, ReadinessCheck readiness);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens. The error names the address and the reason.
  [[nodiscard]] Status start();
  // The bound port (after start; useful with port 0), or 0.
  int port() const { return port_; }
  // Stops listening and closes every client. Safe to call twice and before start();
  // `on_closed` runs once every handle is closed (at once if none is open).
  void close(std::function<void()> on_closed = {});
  size_t clientCount() const { return clients_.size(); }
  bool closing() const { return closing_; }

 private:
  struct Connection;
  enum class ConnState { kReading, kWriting, kLingering, kClosing };

  HttpServer(uv_loop_t* loop, Metrics& metrics, HttpServerOptions options,
             ReadinessCheck readiness);

  static void onConnection(uv_stream_t* listener, int status);
  static void onListenerClosed(uv_handle_t* handle);
  static void onRejectClosed(uv_handle_t* handle);
  static void onAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void onRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void onWrite(uv_write_t* req, int status);
  static void onShutdown(uv_shutdown_t* req, int status);
  static void onTimer(uv_timer_t* timer);
  static void onConnectionHandleClosed(uv_handle_t* handle);

  void accept();
  // Closes the oldest client that has not sent a whole request (or, failing that, one already
  // answered). False when there is none.
  bool makeRoom();
  void reject(const char* reason);
  void received(Connection& c, const char* data, size_t n);
  void handle(Connection& c, const HttpRequest& request);
  void respond(Connection& c, int code, std::string_view handler, std::string content_type,
               std::string body, bool head_only, std::string_view extra_headers = {});
  void setState(Connection& c, ConnState next);
  void closeConnection(Connection& c);
  void release(Connection* c);
  void maybeFinishClose();

  uv_loop_t* loop_;
  Metrics& metrics_;
  HttpServerOptions options_;
  ReadinessCheck readiness_;
  uv_tcp_t listener_{};
  bool listener_open_ = false;
  bool closing_ = false;
  int port_ = 0;
  size_t pending_rejects_ = 0;  // rejected sockets whose close is pending
  uint64_t accepted_ = 0;
  size_t last_scrape_bytes_ = 16384;
  std::unordered_map<Connection*, std::unique_ptr<Connection>> clients_;
  std::vector<std::function<void()>> on_closed_;
  std::shared_ptr<HttpServer> self_;  // set while any handle is open
};

}  // namespace pgwarden::daemon::metrics
