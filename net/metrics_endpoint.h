// The metrics and health endpoint: GET/HEAD /metrics, /healthz and /readyz, a handler over the
// HTTP transport (net/http_transport.h) on the daemon's libuv loop. The transport bounds every
// client in bytes and in time and caps their number; this file holds the routes, the optional
// bearer or basic auth of /metrics, and the counters of the endpoint's own traffic.
#pragma once

#include <uv.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "metrics/metrics.h"
#include "net/http_auth.h"
#include "net/http_transport.h"

namespace pgwarden::net {

struct MetricsEndpointOptions {
  std::string listen = "127.0.0.1:9930";  // host:port, [v6]:port; port 0 = any
  // Beyond it, the client that has waited longest without a request in hand is closed to make
  // room (then one already answered); only when every client is being answered is a new one
  // refused at once.
  size_t max_clients = 64;
  size_t max_request_bytes = 8192;                     // request line + headers
  std::chrono::milliseconds read_timeout{10000};       // a request's start .. its end (slowloris)
  std::chrono::milliseconds write_timeout{10000};      // response taken by the client
  std::chrono::milliseconds keepalive_timeout{60000};  // between a scraper's requests
  std::chrono::milliseconds linger_timeout{2000};      // after the last response, wait for the FIN
  net::HttpAuth auth;  // guards /metrics (and /studio/); /healthz and /readyz stay open for probes
  // `studio: true`: the read-only history studio at /studio/ (studio/studio.h), behind `auth`.
  bool studio = false;
};

// Parses the `metrics:` section (absent node: defaults). Keys: listen, max_clients,
// read_timeout, bearer_token_file, basic_auth_file ("user:password" on the first line), studio.
// Throws config::ConfigError with the line and dotted key.
MetricsEndpointOptions parseMetricsConfig(const YAML::Node& node);

struct Readiness {
  bool ready = false;
  std::string reason;  // one short line for the 503 body, e.g. "upstream unreachable"
};
using ReadinessCheck = std::function<Readiness()>;
// Runs before a scrape or a readiness check and calls `done` on the loop when what they read is
// current (several worker loops publish their figures first); `done` may run inside the call.
using Refresh = std::function<void(std::function<void()> done)>;

// Pages served under one path prefix on the same listener, behind the same auth as /metrics, to
// GET and HEAD only (the history studio). Runs on the loop; `answer` may be called inside
// serve() or on a later loop turn, at most once; a late answer to a client gone is dropped.
class HttpPages {
 public:
  virtual ~HttpPages() = default;
  virtual std::string_view prefix() const = 0;  // e.g. "/studio/"; its path without the slash too
  virtual void serve(const net::HttpRequest& request,
                     std::function<void(net::HttpResponse)> answer) = 0;
};

// Owns its transport, which keeps itself alive until its handles are closed: the endpoint may be
// destroyed right after close(). All methods run on the loop thread.
class MetricsEndpoint final : public net::HttpHandler {
 public:
  // `metrics` must outlive the endpoint; `readiness` runs on the loop for each GET /readyz.
  MetricsEndpoint(uv_loop_t* loop, metrics::Metrics& metrics, const MetricsEndpointOptions& options,
                  ReadinessCheck readiness);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  void setRefresh(Refresh refresh) { refresh_ = std::move(refresh); }
  // Serves `pages` (which must outlive the endpoint, or be unset first); null: none.
  void setPages(HttpPages* pages) { pages_ = pages; }
  // Binds and listens. The error names the address and the reason.
  [[nodiscard]] Status start();
  // The bound port (after start; useful with port 0), or 0.
  int port() const { return transport_ ? transport_->port() : 0; }
  // Stops listening and closes every client. Safe to call twice and before start().
  void close();
  size_t clientCount() const { return transport_ ? transport_->connectionCount() : 0; }

  // HttpHandler
  void onHttpRequest(uint64_t exchange, net::HttpRequest&& request) override;
  void onHttpAbandoned(uint64_t) override {}  // a late answer to a gone client is dropped
  void onHttpRefused(net::HttpRefusal why, int status) override;

 private:
  void respond(uint64_t exchange, std::string_view handler, net::HttpResponse response);
  // Runs `answer` once the figures are current (at once without a refresh hook).
  void whenCurrent(std::function<void()> answer);
  net::HttpResponse scrape();
  net::HttpResponse ready();

  metrics::Metrics& metrics_;
  net::HttpAuth auth_;
  ReadinessCheck readiness_;
  Refresh refresh_;
  HttpPages* pages_ = nullptr;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::shared_ptr<net::HttpTransport> transport_;
  size_t last_scrape_bytes_ = 16384;
};

}  // namespace pgwarden::net
