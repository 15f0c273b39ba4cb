#include "mcp/http_transport.h"

#include <http_parser.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "net/http_server.h"
#include "net/stream.h"

namespace pgwarden::mcp {

using daemon::Stream;
using daemon::StreamEvents;

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

const char* reasonPhrase(int code) {
  switch (code) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

bool isLoopback(std::string_view host) {
  return host.rfind("127.", 0) == 0 || host == "::1" || host.rfind("::ffff:127.", 0) == 0;
}

// Bytes a connection keeps of pipelined requests while it waits for an answer.
constexpr size_t kTimerMs = 250;

}  // namespace

std::string_view HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [n, v] : headers) {
    if (n == lower_name) return v;
  }
  return {};
}

bool HttpRequest::hasHeader(std::string_view lower_name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return h.first == lower_name; });
}

void appendHttpResponse(std::string& out, const HttpResponse& r, bool keep_alive) {
  // Straight into the connection's output buffer: the body (a tool's whole result, up to
  // mcp.max_result_bytes) is copied once, not into a formatted copy that is then copied again.
  out.reserve(out.size() + 256 + r.body.size());
  out += "HTTP/1.1 ";
  out += std::to_string(r.status);
  out += ' ';
  out += reasonPhrase(r.status);
  out += "\r\n";
  if (!r.content_type.empty()) {
    out += "Content-Type: ";
    out += r.content_type;
    out += "\r\n";
  }
  if (!r.stream) {
    out += "Content-Length: ";
    out += std::to_string(r.body.size());
    out += "\r\n";
  }
  for (const auto& [n, v] : r.headers) {
    out += n;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  // A stream is read as it comes (no-cache is what SSE clients and proxies expect); its body ends
  // with the connection, so it never keeps the connection alive.
  out += r.stream ? "Cache-Control: no-cache\r\n" : "Cache-Control: no-store\r\n";
  out += keep_alive && !r.stream ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  out += "\r\n";
  out += r.body;
}

// ----- one client ------------------------------------------------------------------------------

class HttpTransport::Connection final : public StreamEvents {
 public:
  // kStreaming: a stream answer's headers are out; body bytes follow until finish() or a close.
  enum class State : uint8_t { kIdle, kReading, kWaiting, kStreaming, kClosing };

  Connection(HttpTransport& t) : t_(t), stream_(t.loop_, this) {
    http_parser_init(&parser_, HTTP_REQUEST);
    parser_.data = this;
  }

  int accept(uv_stream_t* listener) {
    int rc = stream_.initTcp();
    if (rc == 0) rc = stream_.acceptFrom(listener);
    if (rc == 0 && t_.options_.tls) {
      auto engine = daemon::TlsEngine::makeServer(t_.options_.tls);
      if (!engine.ok() || !stream_.startTls(std::move(engine.value())).ok()) rc = UV_EPROTO;
    }
    if (rc == 0) rc = stream_.startRead();
    if (rc == 0) {
      peer_host_ = stream_.peerHost();
      deadline_ms_ = uv_now(t_.loop_) + static_cast<uint64_t>(t_.options_.read_timeout.count());
    }
    return rc;
  }

  State state() const { return state_; }
  uint64_t deadline() const { return deadline_ms_; }
  uint64_t exchange() const { return exchange_; }

  void close() {
    if (state_ == State::kClosing) return;
    setState(State::kClosing);
    abandon();
    stream_.close();
  }

  // A short error answer, then the connection ends.
  void fail(int status, std::string_view text) {
    if (state_ == State::kClosing) return;
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain; charset=utf-8";
    r.body = std::string(text) + "\n";
    r.close = true;
    write(r);
  }

  void write(const HttpResponse& r) {
    if (state_ == State::kClosing) return;
    if (r.stream) {
      startStream(r);
      return;
    }
    const bool keep = keep_alive_ && !r.close && !t_.closing_;
    appendHttpResponse(stream_.out(), r, keep);
    exchange_ = 0;
    if (stream_.flush() != 0) {
      close();
      return;
    }
    if (!keep) {
      setState(State::kClosing);
      stream_.closeWhenFlushed();
      return;
    }
    setState(State::kIdle);
    deadline_ms_ = uv_now(t_.loop_) + static_cast<uint64_t>(t_.options_.keepalive_timeout.count());
    http_parser_pause(&parser_, 0);
    drive();
  }

  // A stream's body bytes. False (and the connection closed without telling the handler) when
  // the client lets more than the cap queue up: a reader that stalls must not fill memory.
  bool send(std::string_view bytes) {
    if (state_ != State::kStreaming) return false;
    if (stream_.pendingBytes() + bytes.size() > t_.options_.max_stream_queue_bytes) {
      spdlog::warn("mcp: dropping the stream to {}: its client is not reading ({} bytes queued, {} more)",
                   peer_host_, stream_.pendingBytes(), bytes.size());
      exchange_ = 0;
      close();
      return false;
    }
    stream_.out().append(bytes);
    if (stream_.flush() != 0) {
      exchange_ = 0;
      close();
      return false;
    }
    return true;
  }

  // The stream ends after its queued bytes; the handler already knows, so it is not told.
  void finishStream() {
    if (state_ != State::kStreaming) return;
    exchange_ = 0;
    setState(State::kClosing);
    stream_.closeWhenFlushed();
  }

  // StreamEvents
  void onStreamData(Stream&, const char* data, size_t len) override {
    if (state_ == State::kClosing) return;
    // A stream's client has nothing more to say; what it sends is dropped, not buffered, and
    // reading goes on so its going away is seen.
    if (state_ == State::kStreaming) return;
    in_.append(data, len);
    if (in_.size() > t_.options_.max_header_bytes + t_.options_.max_body_bytes) stream_.stopRead();
    drive();
  }
  void onStreamEnd(Stream&, int) override { close(); }
  void onStreamWritten(Stream&, int status) override {
    if (status < 0) close();
  }
  void onStreamClosed(Stream&) override { t_.connectionClosed(this); }

 private:
  void setState(State s) { state_ = s; }

  // The headers of a stream answer; the exchange stays registered (send, finish, abandon).
  void startStream(const HttpResponse& r) {
    const uint64_t e = exchange_;
    appendHttpResponse(stream_.out(), r, false);
    exchange_ = 0;
    if (stream_.flush() != 0) {
      close();
      return;
    }
    exchange_ = e;
    t_.exchanges_[e] = this;
    setState(State::kStreaming);
    // Pipelined requests behind a stream would never be answered: the stream is the last thing
    // this connection does.
    in_.clear();
    if (!stream_.reading() && stream_.startRead() != 0) close();
  }

  void abandon() {
    if (exchange_ == 0) return;
    const uint64_t e = exchange_;
    exchange_ = 0;
    t_.exchanges_.erase(e);
    if (t_.handler_) t_.handler_->onHttpAbandoned(e);
  }

  // Parses what is buffered until a whole request is in (then hands it up) or the bytes run out.
  void drive() {
    if (driving_) return;
    driving_ = true;
    while (state_ == State::kIdle || state_ == State::kReading) {
      if (in_.empty()) break;
      const size_t n = http_parser_execute(&parser_, settings(), in_.data(), in_.size());
      const auto err = HTTP_PARSER_ERRNO(&parser_);
      if (err != HPE_OK && err != HPE_PAUSED) {
        driving_ = false;
        if (error_status_ != 0) {
          fail(error_status_, error_status_ == 413 ? "request body too large" : "request headers too large");
        } else {
          fail(400, std::string("malformed HTTP request: ") + http_errno_name(err));
        }
        return;
      }
      in_.erase(0, n);
      if (!ready_) {
        if (n == 0) break;
        continue;
      }
      ready_ = false;
      setState(State::kWaiting);
      exchange_ = ++t_.next_exchange_;
      t_.exchanges_[exchange_] = this;
      HttpRequest req = std::move(req_);
      req_ = HttpRequest();
      req.peer_host = peer_host_;
      req.loopback = isLoopback(peer_host_);
      if (t_.handler_) {
        t_.handler_->onHttpRequest(exchange_, std::move(req));
      } else {
        driving_ = false;
        fail(503, "shutting down");
        return;
      }
    }
    driving_ = false;
    if (state_ != State::kClosing && !stream_.reading() &&
        in_.size() <= t_.options_.max_header_bytes + t_.options_.max_body_bytes) {
      if (stream_.startRead() != 0) close();
    }
  }

  // ----- http-parser callbacks --------------------------------------------------------------
  static Connection& of(http_parser* p) { return *static_cast<Connection*>(p->data); }

  bool countHeader(size_t n) {
    header_bytes_ += n;
    if (header_bytes_ > t_.options_.max_header_bytes) {
      error_status_ = 431;
      return false;
    }
    return true;
  }
  void pushHeader() {
    if (field_.empty()) return;
    std::transform(field_.begin(), field_.end(), field_.begin(), lower);
    req_.headers.emplace_back(std::move(field_), std::move(value_));
    field_.clear();
    value_.clear();
  }

  static int onMessageBegin(http_parser* p) {
    Connection& c = of(p);
    c.setState(State::kReading);
    c.req_ = HttpRequest();
    c.target_.clear();
    c.field_.clear();
    c.value_.clear();
    c.header_bytes_ = 0;
    c.last_was_value_ = false;
    c.error_status_ = 0;
    c.deadline_ms_ = uv_now(c.t_.loop_) + static_cast<uint64_t>(c.t_.options_.read_timeout.count());
    return 0;
  }
  static int onUrl(http_parser* p, const char* at, size_t n) {
    Connection& c = of(p);
    if (!c.countHeader(n)) return -1;
    c.target_.append(at, n);
    return 0;
  }
  static int onHeaderField(http_parser* p, const char* at, size_t n) {
    Connection& c = of(p);
    if (!c.countHeader(n)) return -1;
    if (c.last_was_value_) c.pushHeader();
    c.last_was_value_ = false;
    c.field_.append(at, n);
    return 0;
  }
  static int onHeaderValue(http_parser* p, const char* at, size_t n) {
    Connection& c = of(p);
    if (!c.countHeader(n)) return -1;
    c.last_was_value_ = true;
    c.value_.append(at, n);
    return 0;
  }
  static int onHeadersComplete(http_parser* p) {
    Connection& c = of(p);
    c.pushHeader();
    if (c.req_.headers.size() > 100) {
      c.error_status_ = 431;
      return -1;
    }
    c.req_.method = http_method_str(static_cast<http_method>(p->method));
    const size_t cut = c.target_.find_first_of("?#");
    c.req_.path = c.target_.substr(0, cut);
    if ((p->flags & F_CONTENTLENGTH) != 0 && p->content_length > c.t_.options_.max_body_bytes) {
      c.error_status_ = 413;
      return -1;
    }
    c.keep_alive_ = http_should_keep_alive(p) != 0;
    // A client that waits for leave to send its body (curl does, above 1 KiB) gets it at once.
    if (p->http_minor >= 1 && c.req_.header("expect") == "100-continue") {
      c.stream_.out() += "HTTP/1.1 100 Continue\r\n\r\n";
      if (c.stream_.flush() != 0) return -1;
    }
    return 0;
  }
  static int onBody(http_parser* p, const char* at, size_t n) {
    Connection& c = of(p);
    if (c.req_.body.size() + n > c.t_.options_.max_body_bytes) {
      c.error_status_ = 413;
      return -1;
    }
    c.req_.body.append(at, n);
    return 0;
  }
  static int onMessageComplete(http_parser* p) {
    Connection& c = of(p);
    c.keep_alive_ = http_should_keep_alive(p) != 0;
    c.ready_ = true;
    // One request at a time: the parser stops right after it; pipelined bytes wait in in_.
    http_parser_pause(p, 1);
    return 0;
  }
  static const http_parser_settings* settings() {
    static const http_parser_settings s = [] {
      http_parser_settings x;
      http_parser_settings_init(&x);
      x.on_message_begin = &Connection::onMessageBegin;
      x.on_url = &Connection::onUrl;
      x.on_header_field = &Connection::onHeaderField;
      x.on_header_value = &Connection::onHeaderValue;
      x.on_headers_complete = &Connection::onHeadersComplete;
      x.on_body = &Connection::onBody;
      x.on_message_complete = &Connection::onMessageComplete;
      return x;
    }();
    return &s;
  }

  HttpTransport& t_;
  Stream stream_;
  http_parser parser_{};
  State state_ = State::kIdle;
  std::string in_;
  HttpRequest req_;
  std::string target_;
  std::string field_;
  std::string value_;
  std::string peer_host_;
  size_t header_bytes_ = 0;
  int error_status_ = 0;
  uint64_t deadline_ms_ = 0;
  uint64_t exchange_ = 0;
  bool last_was_value_ = false;
  bool keep_alive_ = true;
  bool ready_ = false;
  bool driving_ = false;
};

// ----- the transport ---------------------------------------------------------------------------

std::shared_ptr<HttpTransport> HttpTransport::create(uv_loop_t* loop, HttpTransportOptions options,
                                                     HttpHandler* handler) {
  return std::shared_ptr<HttpTransport>(new HttpTransport(loop, std::move(options), handler));
}

HttpTransport::HttpTransport(uv_loop_t* loop, HttpTransportOptions options, HttpHandler* handler)
    : loop_(loop), options_(std::move(options)), handler_(handler) {}

HttpTransport::~HttpTransport() = default;

Status HttpTransport::start() {
  auto addr = daemon::metrics::parseListenAddress(options_.listen);
  if (!addr.ok()) return Status::fail("mcp.listen " + options_.listen + ": " + addr.error());
  self_ = shared_from_this();
  uv_tcp_init(loop_, &listener_);
  listener_.data = this;
  ++handles_open_;
  uv_timer_init(loop_, &timer_);
  timer_.data = this;
  ++handles_open_;
  uv_idle_init(loop_, &sweep_);
  sweep_.data = this;
  ++handles_open_;
  if (addr->ss_family == AF_INET6) {
    int rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&*addr), UV_TCP_IPV6ONLY);
    if (rc != 0) {
      close();
      return Status::fail("mcp.listen " + options_.listen + ": " + uv_strerror(rc));
    }
  } else if (int rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&*addr), 0); rc != 0) {
    close();
    return Status::fail("mcp.listen " + options_.listen + ": " + uv_strerror(rc));
  }
  if (int rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 128, &HttpTransport::onConnection); rc != 0) {
    close();
    return Status::fail("mcp.listen " + options_.listen + ": " + uv_strerror(rc));
  }
  sockaddr_storage bound{};
  int len = sizeof(bound);
  if (uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  uv_timer_start(&timer_, &HttpTransport::onTimer, kTimerMs, kTimerMs);
  uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
  return {};
}

void HttpTransport::onConnection(uv_stream_t* listener, int status) {
  auto* self = static_cast<HttpTransport*>(listener->data);
  if (status < 0 || self->closing_) return;
  self->accept();
}

void HttpTransport::accept() {
  if (conns_.size() >= options_.max_connections) {
    // Make room: the connection idle the longest goes (it can reconnect); else the newcomer.
    Connection* victim = nullptr;
    for (auto& [p, c] : conns_) {
      if (c->state() == Connection::State::kIdle && (!victim || c->deadline() < victim->deadline())) victim = p;
    }
    if (victim) victim->close();
  }
  auto c = std::make_unique<Connection>(*this);
  Connection* raw = c.get();
  conns_.emplace(raw, std::move(c));
  if (raw->accept(reinterpret_cast<uv_stream_t*>(&listener_)) != 0) {
    raw->close();
    return;
  }
  size_t open = 0;
  for (auto& [p, conn] : conns_) open += conn->state() != Connection::State::kClosing;
  if (open > options_.max_connections) raw->fail(503, "too many MCP connections");
}

void HttpTransport::respond(uint64_t exchange, HttpResponse response) {
  auto it = exchanges_.find(exchange);
  if (it == exchanges_.end()) return;
  Connection* c = it->second;
  exchanges_.erase(it);
  c->write(response);
}

bool HttpTransport::send(uint64_t exchange, std::string_view bytes) {
  auto it = exchanges_.find(exchange);
  if (it == exchanges_.end()) return false;
  Connection* c = it->second;
  if (c->send(bytes)) return true;
  exchanges_.erase(exchange);
  return false;
}

void HttpTransport::finish(uint64_t exchange) {
  auto it = exchanges_.find(exchange);
  if (it == exchanges_.end()) return;
  Connection* c = it->second;
  exchanges_.erase(it);
  c->finishStream();
}

void HttpTransport::connectionClosed(Connection* c) {
  if (c->exchange() != 0) exchanges_.erase(c->exchange());
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  graveyard_.push_back(std::move(it->second));
  conns_.erase(it);
  if (closing_) {
    // The last connection of a closing transport lets it go. Nothing runs after this callback
    // (Stream::onClose and Connection::onStreamClosed end with it), so freeing them here is safe.
    maybeRelease();
    return;
  }
  uv_idle_start(&sweep_, &HttpTransport::onSweep);
}

void HttpTransport::onSweep(uv_idle_t* idle) {
  auto* self = static_cast<HttpTransport*>(idle->data);
  uv_idle_stop(idle);
  self->graveyard_.clear();
}

void HttpTransport::onTimer(uv_timer_t* timer) {
  auto* self = static_cast<HttpTransport*>(timer->data);
  const uint64_t now = uv_now(self->loop_);
  std::vector<Connection*> late;
  for (auto& [p, c] : self->conns_) {
    const auto s = c->state();
    if ((s == Connection::State::kIdle || s == Connection::State::kReading) && now >= c->deadline()) {
      late.push_back(p);
    }
  }
  for (Connection* c : late) {
    if (c->state() == Connection::State::kReading) {
      c->fail(408, "request not received in time");
    } else {
      c->close();
    }
  }
}

void HttpTransport::close() {
  if (closing_) return;
  closing_ = true;
  handler_ = nullptr;
  exchanges_.clear();
  std::vector<Connection*> all;
  for (auto& [p, c] : conns_) all.push_back(p);
  for (Connection* c : all) c->close();
  if (handles_open_ > 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), &HttpTransport::onListenerClosed);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &HttpTransport::onTimerClosed);
    uv_close(reinterpret_cast<uv_handle_t*>(&sweep_), &HttpTransport::onTimerClosed);
  }
  maybeRelease();
}

void HttpTransport::onListenerClosed(uv_handle_t* handle) {
  auto* self = static_cast<HttpTransport*>(handle->data);
  --self->handles_open_;
  self->maybeRelease();
}

void HttpTransport::onTimerClosed(uv_handle_t* handle) {
  auto* self = static_cast<HttpTransport*>(handle->data);
  --self->handles_open_;
  self->maybeRelease();
}

void HttpTransport::maybeRelease() {
  if (!closing_ || handles_open_ > 0 || !conns_.empty()) return;
  // Last statement: this may destroy the transport.
  std::shared_ptr<HttpTransport> keep = std::move(self_);
}

}  // namespace pgwarden::mcp
