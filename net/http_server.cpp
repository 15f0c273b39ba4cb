// The metrics/health HTTP endpoint on the libuv loop. Each client goes Reading -> Writing ->
// Lingering -> Closing through setState(); a timer bounds every phase, so a slow or silent
// client costs a handle for at most read_timeout + write_timeout + linger_timeout.
#include "net/http_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "common/config_util.h"
#include "common/log_text.h"

namespace pgwarden::daemon::metrics {

namespace {

constexpr size_t kMaxHeaders = 100;
constexpr size_t kMaxMethodLength = 16;
constexpr size_t kMaxLingerBytes = 64 * 1024;  // discarded after the response, then we close

bool isTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

ParseResult bad(std::string why) {
  ParseResult r;
  r.status = ParseStatus::kBad;
  r.error = std::move(why);
  return r;
}

// Request line: method SP request-target SP HTTP-version (RFC 9112 section 3).
bool parseRequestLine(std::string_view line, HttpRequest& req, std::string& error) {
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    error = "malformed request line";
    return false;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (method.empty()) {
    error = "empty method";
    return false;
  }
  if (target.empty() || target.front() != '/' ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    error = "request target must be an absolute path";
    return false;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    error = "unsupported HTTP version";
    return false;
  }
  req.method = method;
  req.target = target;
  req.path = target.substr(0, target.find_first_of("?#"));
  return true;
}

int base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::optional<std::string> base64Decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = base64Value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// Time depends on the expected secret's length only, not on where the first difference is.
bool constantTimeEquals(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

const char* reasonPhrase(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string errorName(int status) { return uv_strerror(status); }

}  // namespace

// ----- config and parsing ---------------------------------------------------------------------

HttpServerOptions parseMetricsConfig(const YAML::Node& node) {
  HttpServerOptions o;
  if (!node || node.IsNull()) return o;
  const std::string path = "metrics";
  config::requireMap(node, path);
  config::checkKeys(
      node, path,
      {"listen", "max_clients", "read_timeout", "bearer_token_file", "basic_auth_file"});
  o.listen = config::getString(node, path, "listen", o.listen);
  if (!o.listen.empty() && !parseListenAddress(o.listen).ok()) {
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
    o.auth.kind = HttpAuth::Kind::kBearer;
    o.auth.secret =
        config::readSecretFile(node["bearer_token_file"], path + ".bearer_token_file", *bearer);
    if (o.auth.secret.empty()) {
      config::fail(node["bearer_token_file"], path + ".bearer_token_file", "the file is empty");
    }
  } else if (basic) {
    o.auth.kind = HttpAuth::Kind::kBasic;
    o.auth.secret =
        config::readSecretFile(node["basic_auth_file"], path + ".basic_auth_file", *basic);
    if (o.auth.secret.find(':') == std::string::npos || o.auth.secret.front() == ':') {
      config::fail(node["basic_auth_file"], path + ".basic_auth_file",
                   "the file must hold user:password on its first line");
    }
  }
  return o;
}

Result<sockaddr_storage> parseListenAddress(std::string_view text) {
  std::string host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Error{"expected [address]:port"};
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) {
      return Error{"expected host:port"};
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return Error{"invalid port"};
  }
  int port = std::stoi(std::string(port_text));
  if (port > 65535) return Error{"invalid port"};
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_storage addr{};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr)) == 0) return addr;
  addr = {};
  if (uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr)) == 0) return addr;
  return Error{"not a numeric IP address: " + host};
}

ParseResult parseHttpRequest(std::string_view data, size_t max_bytes) {
  // The method is checked byte by byte so that TLS or binary garbage is refused on arrival
  // rather than after the read timeout.
  size_t m = 0;
  for (; m < data.size() && data[m] != ' '; ++m) {
    if (!isTchar(data[m])) return bad("invalid method");
    if (m >= kMaxMethodLength) return bad("invalid method");
  }
  ParseResult result;
  HttpRequest& req = result.request;
  size_t pos = 0;
  size_t headers = 0;
  bool first = true;
  while (true) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string_view::npos) {
      if (data.size() > max_bytes) return bad("request headers too large");
      return result;  // incomplete
    }
    if (nl + 1 > max_bytes) return bad("request headers too large");
    std::string_view line = data.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_of(std::string_view("\r\0", 2)) != std::string_view::npos) {
      return bad("control character in request");
    }
    pos = nl + 1;
    if (first) {
      first = false;
      std::string error;
      if (!parseRequestLine(line, req, error)) return bad(error);
      continue;
    }
    if (line.empty()) break;  // end of headers
    if (++headers > kMaxHeaders) return bad("too many headers");
    if (line.front() == ' ' || line.front() == '\t') return bad("folded header line");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return bad("malformed header line");
    std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), isTchar)) return bad("malformed header name");
    std::string_view value = trimOws(line.substr(colon + 1));
    if (equalsIgnoreCase(name, "accept")) {
      if (!req.accept.empty()) req.accept.push_back(',');
      req.accept.append(value);
    } else if (equalsIgnoreCase(name, "authorization")) {
      req.authorization = value;
    } else if (equalsIgnoreCase(name, "content-length")) {
      if (value.empty() ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return bad("invalid Content-Length");
      }
      if (value.find_first_not_of('0') != std::string_view::npos) req.has_body = true;
    } else if (equalsIgnoreCase(name, "transfer-encoding")) {
      req.has_body = true;
    }
  }
  result.status = ParseStatus::kComplete;
  return result;
}

bool authorized(const HttpAuth& auth, std::string_view header) {
  switch (auth.kind) {
    case HttpAuth::Kind::kNone:
      return true;
    case HttpAuth::Kind::kBearer: {
      size_t sp = header.find(' ');
      if (sp == std::string_view::npos || !equalsIgnoreCase(header.substr(0, sp), "bearer")) {
        return false;
      }
      return constantTimeEquals(trimOws(header.substr(sp + 1)), auth.secret);
    }
    case HttpAuth::Kind::kBasic: {
      size_t sp = header.find(' ');
      if (sp == std::string_view::npos || !equalsIgnoreCase(header.substr(0, sp), "basic")) {
        return false;
      }
      auto decoded = base64Decode(trimOws(header.substr(sp + 1)));
      return decoded && constantTimeEquals(*decoded, auth.secret);
    }
  }
  return false;
}

// ----- the server -----------------------------------------------------------------------------

struct HttpServer::Connection {
  explicit Connection(HttpServer* s) : server(s) {
    tcp.data = this;
    timer.data = this;
    write_req.data = this;
    shutdown_req.data = this;
  }
  HttpServer* server;
  uv_tcp_t tcp{};
  uv_timer_t timer{};
  uv_write_t write_req{};
  uv_shutdown_t shutdown_req{};
  ConnState state = ConnState::kReading;
  uint64_t seq = 0;      // order of arrival
  int open_handles = 0;  // handles initialised and not yet through their close callback
  size_t lingered = 0;
  std::string in;
  std::string head;
  std::string body;
  std::array<char, 4096> read_buf{};
};

std::shared_ptr<HttpServer> HttpServer::create(uv_loop_t* loop, Metrics& metrics,
                                               HttpServerOptions options,
                                               ReadinessCheck readiness) {
  return std::shared_ptr<HttpServer>(
      new HttpServer(loop, metrics, std::move(options), std::move(readiness)));
}

HttpServer::HttpServer(uv_loop_t* loop, Metrics& metrics, HttpServerOptions options,
                       ReadinessCheck readiness)
    : loop_(loop),
      metrics_(metrics),
      options_(std::move(options)),
      readiness_(std::move(readiness)) {
  listener_.data = this;
}

// Handles are closed through close(); by the time the last reference goes, none is open.
HttpServer::~HttpServer() = default;

Status HttpServer::start() {
  if (closing_ || listener_open_) return Status::fail("metrics endpoint already started");
  auto addr = parseListenAddress(options_.listen);
  if (!addr) return Status::fail("metrics.listen " + options_.listen + ": " + addr.error());
  int rc = uv_tcp_init(loop_, &listener_);
  if (rc != 0) return Status::fail("metrics.listen: " + errorName(rc));
  listener_open_ = true;
  self_ = shared_from_this();
  rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&*addr), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 128, onConnection);
  if (rc != 0) {
    close();
    return Status::fail("metrics.listen " + options_.listen + ": " + errorName(rc));
  }
  sockaddr_storage bound{};
  int len = sizeof(bound);
  if (uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  spdlog::info("metrics endpoint listening on {} (port {})", options_.listen, port_);
  return {};
}

void HttpServer::close(std::function<void()> on_closed) {
  if (on_closed) on_closed_.push_back(std::move(on_closed));
  if (!closing_) {
    closing_ = true;
    if (listener_open_) uv_close(reinterpret_cast<uv_handle_t*>(&listener_), onListenerClosed);
    std::vector<Connection*> open;
    for (auto& [ptr, conn] : clients_) open.push_back(ptr);
    for (Connection* c : open) closeConnection(*c);
  }
  maybeFinishClose();
}

void HttpServer::maybeFinishClose() {
  if (!closing_ || listener_open_ || !clients_.empty() || pending_rejects_ > 0) return;
  auto callbacks = std::move(on_closed_);
  on_closed_.clear();
  auto keep = std::move(self_);  // may be the last reference: dropped when this returns
  for (auto& cb : callbacks) cb();
}

void HttpServer::onListenerClosed(uv_handle_t* handle) {
  auto* self = static_cast<HttpServer*>(handle->data);
  self->listener_open_ = false;
  self->maybeFinishClose();
}

void HttpServer::onConnection(uv_stream_t* listener, int status) {
  auto* self = static_cast<HttpServer*>(listener->data);
  if (status < 0) {
    spdlog::warn("metrics endpoint: accept failed: {}", errorName(status));
    return;
  }
  if (self->closing_) return;
  if (self->clients_.size() >= self->options_.max_clients && !self->makeRoom()) {
    self->reject("max_clients");
  } else {
    self->accept();
  }
}

bool HttpServer::makeRoom() {
  // With every slot taken, the client that has been there longest without sending a whole
  // request gives way (then one already answered that is waiting for the peer's FIN), so
  // half-open connections cannot keep health probes out: a probe sends its request at once.
  Connection* victim = nullptr;
  for (const ConnState wanted : {ConnState::kReading, ConnState::kLingering}) {
    for (auto& [ptr, conn] : clients_) {
      if (conn->state == wanted && (victim == nullptr || conn->seq < victim->seq)) victim = ptr;
    }
    if (victim != nullptr) break;
  }
  if (victim == nullptr) return false;  // all busy writing responses: bounded by write_timeout
  if (victim->state == ConnState::kReading) {
    spdlog::debug("metrics endpoint: closing the oldest incomplete request to make room "
                  "(max_clients {})", options_.max_clients);
    metrics_.http_connections_rejected.with({"evicted"}).inc();
  }
  closeConnection(*victim);
  return true;
}

void HttpServer::reject(const char* reason) {
  // Accepted and closed at once: the socket leaves the backlog instead of piling up there.
  // Counted first: uv_close() closes the descriptor synchronously, and the client may look.
  metrics_.http_connections_rejected.with({reason}).inc();
  auto* tcp = new uv_tcp_t{};
  tcp->data = this;
  if (uv_tcp_init(loop_, tcp) != 0) {
    delete tcp;
    return;
  }
  ++pending_rejects_;
  (void)uv_accept(reinterpret_cast<uv_stream_t*>(&listener_), reinterpret_cast<uv_stream_t*>(tcp));
  uv_close(reinterpret_cast<uv_handle_t*>(tcp), onRejectClosed);
}

void HttpServer::onRejectClosed(uv_handle_t* handle) {
  auto* self = static_cast<HttpServer*>(handle->data);
  delete reinterpret_cast<uv_tcp_t*>(handle);
  --self->pending_rejects_;
  self->maybeFinishClose();
}

void HttpServer::accept() {
  auto owned = std::make_unique<Connection>(this);
  Connection& c = *owned;
  c.seq = ++accepted_;
  if (uv_tcp_init(loop_, &c.tcp) != 0) return;
  ++c.open_handles;
  clients_.emplace(&c, std::move(owned));
  if (uv_timer_init(loop_, &c.timer) == 0) ++c.open_handles;
  int rc =
      uv_accept(reinterpret_cast<uv_stream_t*>(&listener_), reinterpret_cast<uv_stream_t*>(&c.tcp));
  if (rc == 0 && c.open_handles == 2) {
    rc = uv_read_start(reinterpret_cast<uv_stream_t*>(&c.tcp), onAlloc, onRead);
  }
  if (rc != 0 || c.open_handles != 2) {
    closeConnection(c);
    return;
  }
  uv_timer_start(&c.timer, onTimer, static_cast<uint64_t>(options_.read_timeout.count()), 0);
}

void HttpServer::setState(Connection& c, ConnState next) {
  bool legal = false;
  switch (c.state) {
    case ConnState::kReading:
      legal = next == ConnState::kWriting || next == ConnState::kClosing;
      break;
    case ConnState::kWriting:
      legal = next == ConnState::kLingering || next == ConnState::kClosing;
      break;
    case ConnState::kLingering:
      legal = next == ConnState::kClosing;
      break;
    case ConnState::kClosing:
      legal = false;
      break;
  }
  if (!legal) {
    spdlog::error("metrics endpoint: illegal connection state change {} -> {}",
                  static_cast<int>(c.state), static_cast<int>(next));
    return;
  }
  c.state = next;
}

void HttpServer::onAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(handle->data);
  *buf = uv_buf_init(c->read_buf.data(), static_cast<unsigned int>(c->read_buf.size()));
}

void HttpServer::onRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(stream->data);
  HttpServer* self = c->server;
  if (nread < 0) {
    self->closeConnection(*c);  // EOF or error: in every state there is nothing more to do
    return;
  }
  if (nread == 0) return;
  switch (c->state) {
    case ConnState::kReading:
      self->received(*c, buf->base, static_cast<size_t>(nread));
      break;
    case ConnState::kLingering:
      // Draining what the client still sends, so that closing does not reset the connection
      // and destroy the response in flight; bounded, then we close anyway.
      c->lingered += static_cast<size_t>(nread);
      if (c->lingered > kMaxLingerBytes) self->closeConnection(*c);
      break;
    case ConnState::kWriting:
    case ConnState::kClosing:
      break;
  }
}

void HttpServer::received(Connection& c, const char* data, size_t n) {
  c.in.append(data, n);
  ParseResult parsed = parseHttpRequest(c.in, options_.max_request_bytes);
  switch (parsed.status) {
    case ParseStatus::kIncomplete:
      return;
    case ParseStatus::kBad:
      spdlog::debug("metrics endpoint: bad request: {}", logsafe(parsed.error));
      uv_read_stop(reinterpret_cast<uv_stream_t*>(&c.tcp));
      respond(c, 400, "other", "text/plain; charset=utf-8", "bad request: " + parsed.error + "\n",
              false);
      return;
    case ParseStatus::kComplete:
      uv_read_stop(reinterpret_cast<uv_stream_t*>(&c.tcp));
      handle(c, parsed.request);
      return;
  }
}

void HttpServer::handle(Connection& c, const HttpRequest& req) {
  const std::string text = "text/plain; charset=utf-8";
  std::string_view handler = "other";
  if (req.path == "/metrics") {
    handler = "metrics";
  } else if (req.path == "/healthz") {
    handler = "healthz";
  } else if (req.path == "/readyz") {
    handler = "readyz";
  }
  bool head = req.method == "HEAD";
  if (!head && req.method != "GET") {
    respond(c, 405, handler, text, "method not allowed\n", false, "Allow: GET, HEAD\r\n");
    return;
  }
  if (req.has_body) {
    respond(c, 400, handler, text, "bad request: request bodies are not accepted\n", head);
    return;
  }
  if (handler == "metrics") {
    if (!authorized(options_.auth, req.authorization)) {
      const char* challenge = options_.auth.kind == HttpAuth::Kind::kBasic
                                  ? "WWW-Authenticate: Basic realm=\"pgwarden\"\r\n"
                                  : "WWW-Authenticate: Bearer\r\n";
      respond(c, 401, handler, text, "unauthorized\n", head, challenge);
      return;
    }
    std::string body;
    // Collectors are other modules' code running inside a libuv callback: nothing they throw
    // (std::bad_alloc included) may unwind through libuv.
    try {
      body.reserve(last_scrape_bytes_ + last_scrape_bytes_ / 4);
      metrics_.http_scrapes.with({"text"}).inc();
      metrics_.registry.render(body);
    } catch (const std::exception& e) {
      spdlog::error("metrics endpoint: rendering /metrics failed: {}", e.what());
      respond(c, 500, handler, text, "internal error\n", head);
      return;
    }
    last_scrape_bytes_ = body.size();
    respond(c, 200, handler, std::string(kContentType), std::move(body), head);
  } else if (handler == "healthz") {
    respond(c, 200, handler, text, "ok\n", head);
  } else if (handler == "readyz") {
    Readiness r{true, {}};
    if (readiness_) {
      try {
        r = readiness_();
      } catch (const std::exception& e) {
        r = Readiness{false, "readiness check failed"};
        spdlog::error("metrics endpoint: readiness check threw: {}", e.what());
      }
    }
    if (r.ready) {
      respond(c, 200, handler, text, "ready\n", head);
    } else {
      std::string reason = r.reason.empty() ? std::string("not ready") : r.reason;
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      respond(c, 503, handler, text, reason + "\n", head);
    }
  } else {
    respond(c, 404, handler, text, "not found\n", head);
  }
}

void HttpServer::respond(Connection& c, int code, std::string_view handler,
                         std::string content_type, std::string body, bool head_only,
                         std::string_view extra_headers) {
  char code_text[8];
  std::snprintf(code_text, sizeof(code_text), "%d", code);
  metrics_.http_requests.with({handler, code_text}).inc();
  c.head = "HTTP/1.1 ";
  c.head += code_text;
  c.head += ' ';
  c.head += reasonPhrase(code);
  c.head += "\r\nContent-Type: ";
  c.head += content_type;
  c.head += "\r\nContent-Length: ";
  c.head += std::to_string(body.size());
  c.head += "\r\nCache-Control: no-store\r\nConnection: close\r\n";
  c.head += extra_headers;
  c.head += "\r\n";
  c.body = head_only ? std::string() : std::move(body);
  setState(c, ConnState::kWriting);
  uv_timer_start(&c.timer, onTimer, static_cast<uint64_t>(options_.write_timeout.count()), 0);
  uv_buf_t bufs[2] = {uv_buf_init(c.head.data(), static_cast<unsigned int>(c.head.size())),
                      uv_buf_init(c.body.data(), static_cast<unsigned int>(c.body.size()))};
  int rc = uv_write(&c.write_req, reinterpret_cast<uv_stream_t*>(&c.tcp), bufs,
                    c.body.empty() ? 1 : 2, onWrite);
  if (rc != 0) closeConnection(c);
}

void HttpServer::onWrite(uv_write_t* req, int status) {
  auto* c = static_cast<Connection*>(req->data);
  HttpServer* self = c->server;
  if (c->state == ConnState::kClosing) return;  // cancelled by uv_close
  c->head.clear();
  c->body = std::string();
  if (status < 0) {
    self->closeConnection(*c);
    return;
  }
  // Half-close, then read until the client's FIN (or the linger timer): closing a socket with
  // unread input would send RST and could discard the response before the client reads it.
  self->setState(*c, ConnState::kLingering);
  uv_timer_start(&c->timer, onTimer, static_cast<uint64_t>(self->options_.linger_timeout.count()),
                 0);
  if (uv_shutdown(&c->shutdown_req, reinterpret_cast<uv_stream_t*>(&c->tcp), onShutdown) != 0 ||
      uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), onAlloc, onRead) != 0) {
    self->closeConnection(*c);
  }
}

void HttpServer::onShutdown(uv_shutdown_t* req, int status) {
  auto* c = static_cast<Connection*>(req->data);
  if (status < 0 && c->state != ConnState::kClosing) c->server->closeConnection(*c);
}

void HttpServer::onTimer(uv_timer_t* timer) {
  auto* c = static_cast<Connection*>(timer->data);
  HttpServer* self = c->server;
  if (c->state == ConnState::kReading) {
    spdlog::debug("metrics endpoint: client sent no complete request within {} ms",
                  self->options_.read_timeout.count());
    self->metrics_.http_connections_rejected.with({"read_timeout"}).inc();
  }
  self->closeConnection(*c);
}

void HttpServer::closeConnection(Connection& c) {
  if (c.state == ConnState::kClosing) return;
  setState(c, ConnState::kClosing);
  auto* tcp = reinterpret_cast<uv_handle_t*>(&c.tcp);
  auto* timer = reinterpret_cast<uv_handle_t*>(&c.timer);
  // open_handles counts tcp first, then the timer; close exactly the ones initialised.
  if (c.open_handles >= 1 && !uv_is_closing(tcp)) uv_close(tcp, onConnectionHandleClosed);
  if (c.open_handles >= 2 && !uv_is_closing(timer)) uv_close(timer, onConnectionHandleClosed);
  if (c.open_handles == 0) release(&c);
}

void HttpServer::onConnectionHandleClosed(uv_handle_t* handle) {
  auto* c = static_cast<Connection*>(handle->data);
  if (--c->open_handles == 0) c->server->release(c);
}

void HttpServer::release(Connection* c) {
  clients_.erase(c);  // frees c
  maybeFinishClose();
}

}  // namespace pgwarden::daemon::metrics
