// The metrics/health endpoint's routes over the HTTP transport: each request is answered inside
// its onHttpRequest call (a scrape renders on the loop, as collectors read loop state), so no
// exchange is ever left open; the transport's own refusals are counted here too.
#include "net/metrics_endpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/config_util.h"

namespace pgwarden::net {

namespace {

constexpr std::string_view kText = "text/plain; charset=utf-8";

}  // namespace

// ----- config --------------------------------------------------------------------------------

MetricsEndpointOptions parseMetricsConfig(const YAML::Node& node) {
  MetricsEndpointOptions o;
  if (!node || node.IsNull()) return o;
  const std::string path = "metrics";
  config::requireMap(node, path);
  config::checkKeys(
      node, path,
      {"listen", "max_clients", "read_timeout", "bearer_token_file", "basic_auth_file", "studio"});
  o.studio = config::getBool(node, path, "studio", o.studio);
  o.listen = config::getString(node, path, "listen", o.listen);
  if (!o.listen.empty() && !net::parseHttpListenAddress(o.listen).ok()) {
    config::fail(node["listen"], path + ".listen",
                 "expected host:port with a numeric address, e.g. 127.0.0.1:9930 or [::1]:9930");
  }
  o.max_clients = static_cast<size_t>(
      config::getInt(node, path, "max_clients", static_cast<int64_t>(o.max_clients), 1, 100000));
  o.read_timeout = config::getDuration(node, path, "read_timeout", o.read_timeout);
  if (o.read_timeout.count() <= 0) {
    config::fail(node["read_timeout"], path + ".read_timeout", "must be greater than 0");
  }
  auto bearer = config::getOptionalString(node, path, "bearer_token_file");
  auto basic = config::getOptionalString(node, path, "basic_auth_file");
  if (bearer && basic) {
    config::fail(node["basic_auth_file"], path + ".basic_auth_file",
                 "set either bearer_token_file or basic_auth_file, not both");
  }
  if (bearer) {
    o.auth.kind = net::HttpAuth::Kind::kBearer;
    o.auth.secret =
        config::readSecretFile(node["bearer_token_file"], path + ".bearer_token_file", *bearer);
    if (o.auth.secret.empty()) {
      config::fail(node["bearer_token_file"], path + ".bearer_token_file", "the file is empty");
    }
  } else if (basic) {
    o.auth.kind = net::HttpAuth::Kind::kBasic;
    o.auth.secret =
        config::readSecretFile(node["basic_auth_file"], path + ".basic_auth_file", *basic);
    if (o.auth.secret.find(':') == std::string::npos || o.auth.secret.front() == ':') {
      config::fail(node["basic_auth_file"], path + ".basic_auth_file",
                   "the file must hold user:password on its first line");
    }
  }
  return o;
}

// ----- the endpoint ---------------------------------------------------------------------------

MetricsEndpoint::MetricsEndpoint(uv_loop_t* loop, metrics::Metrics& metrics,
                                 const MetricsEndpointOptions& options, ReadinessCheck readiness)
    : metrics_(metrics), auth_(options.auth), readiness_(std::move(readiness)) {
  net::HttpTransportOptions t;
  t.name = "metrics";
  t.listen = options.listen;
  t.max_connections = options.max_clients;
  t.max_header_bytes = options.max_request_bytes;
  t.max_body_bytes = 0;  // GET and HEAD only: a request that declares a body is refused at once
  t.read_timeout = options.read_timeout;
  t.write_timeout = options.write_timeout;
  t.keepalive_timeout = options.keepalive_timeout;
  t.linger_timeout = options.linger_timeout;
  transport_ = net::HttpTransport::create(loop, std::move(t), this);
}

// The transport must not call a handler that is gone.
MetricsEndpoint::~MetricsEndpoint() {
  *alive_ = false;  // a page answered later finds the endpoint gone
  close();
}

Status MetricsEndpoint::start() { return transport_->start(); }

void MetricsEndpoint::close() {
  if (transport_) transport_->close();  // keeps itself alive until its handles are closed
}

void MetricsEndpoint::onHttpRequest(uint64_t exchange, net::HttpRequest&& req) {
  std::string_view handler = "other";
  if (req.path == "/metrics") {
    handler = "metrics";
  } else if (req.path == "/healthz") {
    handler = "healthz";
  } else if (req.path == "/readyz") {
    handler = "readyz";
  } else if (pages_ != nullptr &&
             req.path.rfind(std::string(pages_->prefix().substr(0, pages_->prefix().size() - 1)),
                            0) == 0) {
    handler = "studio";
  }
  auto text = [](int status, std::string body) {
    net::HttpResponse r;
    r.status = status;
    r.content_type = kText;
    r.body = std::move(body);
    return r;
  };
  if (req.method != "GET" && req.method != "HEAD") {
    net::HttpResponse r = text(405, "method not allowed\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    respond(exchange, handler, std::move(r));
  } else if (handler == "metrics" || handler == "studio") {
    if (authorized(auth_, req.header("authorization"))) {
      if (handler == "studio") {
        std::weak_ptr<bool> alive = alive_;
        pages_->serve(req, [this, alive, exchange](net::HttpResponse r) {
          if (auto a = alive.lock(); a && *a) respond(exchange, "studio", std::move(r));
        });
        return;
      }
      whenCurrent([this, exchange] { respond(exchange, "metrics", scrape()); });
      return;
    }
    net::HttpResponse r = text(401, "unauthorized\n");
    r.headers.emplace_back("WWW-Authenticate", auth_.kind == net::HttpAuth::Kind::kBasic
                                                   ? "Basic realm=\"pgwarden\""
                                                   : "Bearer");
    respond(exchange, handler, std::move(r));
  } else if (handler == "healthz") {
    respond(exchange, handler, text(200, "ok\n"));
  } else if (handler == "readyz") {
    whenCurrent([this, exchange] { respond(exchange, "readyz", ready()); });
  } else {
    respond(exchange, handler, text(404, "not found\n"));
  }
}

void MetricsEndpoint::whenCurrent(std::function<void()> answer) {
  if (!refresh_) {
    answer();
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  refresh_([alive, answer = std::move(answer)] {
    if (auto a = alive.lock(); a && *a) answer();
  });
}

net::HttpResponse MetricsEndpoint::scrape() {
  net::HttpResponse r;
  r.content_type = metrics::kContentType;
  // Collectors are other modules' code running inside a libuv callback: nothing they throw
  // (std::bad_alloc included) may unwind through libuv.
  try {
    r.body.reserve(last_scrape_bytes_ + last_scrape_bytes_ / 4);
    metrics_.http_scrapes.with({"text"}).inc();
    metrics_.registry.render(r.body);
  } catch (const std::exception& e) {
    spdlog::error("metrics endpoint: rendering /metrics failed: {}", e.what());
    r.status = 500;
    r.content_type = kText;
    r.body = "internal error\n";
    return r;
  }
  last_scrape_bytes_ = r.body.size();
  return r;
}

net::HttpResponse MetricsEndpoint::ready() {
  Readiness state{true, {}};
  if (readiness_) {
    try {
      state = readiness_();
    } catch (const std::exception& e) {
      state = Readiness{false, "readiness check failed"};
      spdlog::error("metrics endpoint: readiness check threw: {}", e.what());
    }
  }
  net::HttpResponse r;
  r.content_type = kText;
  if (state.ready) {
    r.body = "ready\n";
    return r;
  }
  r.status = 503;
  r.body = state.reason.empty() ? std::string("not ready") : state.reason;
  std::replace(r.body.begin(), r.body.end(), '\n', ' ');
  r.body += '\n';
  return r;
}

void MetricsEndpoint::respond(uint64_t exchange, std::string_view handler,
                              net::HttpResponse response) {
  metrics_.http_requests.with({handler, std::to_string(response.status)}).inc();
  transport_->respond(exchange, std::move(response));
}

void MetricsEndpoint::onHttpRefused(net::HttpRefusal why, int status) {
  switch (why) {
    case net::HttpRefusal::kMalformed:
    case net::HttpRefusal::kTooLarge:
      metrics_.http_requests.with({"other", std::to_string(status)}).inc();
      break;
    case net::HttpRefusal::kReadTimeout:
      metrics_.http_connections_rejected.with({"read_timeout"}).inc();
      break;
    case net::HttpRefusal::kEvicted:
      spdlog::debug("metrics endpoint: closing the longest-waiting client to make room");
      metrics_.http_connections_rejected.with({"evicted"}).inc();
      break;
    case net::HttpRefusal::kOverCapacity:
      metrics_.http_connections_rejected.with({"max_clients"}).inc();
      break;
  }
}

}  // namespace pgwarden::net
