// The HTTP/1.1 transport: http-parser drives each connection's state (idle -> reading -> waiting
// for the handler -> idle again, or a stream, or lingering after a last answer -> closing); one
// 250 ms timer enforces every deadline, so a connection costs no timer handle of its own.
#include "net/http_transport.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "net/stream.h"

namespace pgwarden::net {

namespace {

const char* reasonPhrase(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

bool isLoopback(std::string_view host) {
  return host.rfind("127.", 0) == 0 || host == "::1" || host.rfind("::ffff:127.", 0) == 0;
}

constexpr size_t kTimerMs = 250;
// What a lingering connection reads and drops before it closes anyway.
constexpr size_t kMaxLingerBytes = 64 * 1024;

}  // namespace

void appendHttpResponse(std::string& out, const HttpResponse& r, bool keep_alive, bool head_only) {
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
  if (!head_only) out += r.body;
}

// ----- one client ------------------------------------------------------------------------------

class HttpTransport::Connection final : public StreamEvents {
 public:
  // kStreaming: a stream answer's headers are out; body bytes follow until finish() or a close.
  // kLingering: the last answer is out (or going), the write side shut; input is dropped.
  enum class State : uint8_t { kIdle, kReading, kWaiting, kStreaming, kLingering, kClosing };

  explicit Connection(HttpTransport& t)
      : t_(t),
        stream_(t.loop_, this),
        parser_(t.options_.max_header_bytes, t.options_.max_body_bytes),
        seq_(++t.next_seq_) {
    shutdown_req_.data = this;
  }

  int accept(uv_stream_t* listener) {
    int rc = stream_.initTcp();
    if (rc == 0) rc = stream_.acceptFrom(listener);
    if (rc == 0 && t_.options_.tls) {
      auto engine = net::TlsEngine::makeServer(t_.options_.tls);
      if (!engine.ok() || !stream_.startTls(std::move(engine.value())).ok()) rc = UV_EPROTO;
    }
    if (rc == 0) rc = stream_.startRead();
    if (rc == 0) {
      peer_host_ = stream_.peerHost();
      deadline_ms_ = uv_now(t_.loop_) + ms(t_.options_.read_timeout);
    }
    return rc;
  }

  State state() const { return state_; }
  uint64_t deadline() const { return deadline_ms_; }
  uint64_t exchange() const { return exchange_; }
  uint64_t seq() const { return seq_; }
  bool answeredAny() const { return answered_ > 0; }
  // An answer the client has not taken within write_timeout (a stream has its own cap instead).
  bool writeStalled(uint64_t now) const {
    return state_ != State::kStreaming && stream_.pendingBytes() > 0 && now >= write_deadline_ms_;
  }

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
    if (state_ == State::kClosing || state_ == State::kLingering) return;
    if (r.stream) {
      startStream(r);
      return;
    }
    const bool keep = keep_alive_ && !r.close && !t_.closing_;
    appendHttpResponse(stream_.out(), r, keep, parser_.head());
    exchange_ = 0;
    ++answered_;
    if (stream_.flush() != 0) {
      close();
      return;
    }
    write_deadline_ms_ = uv_now(t_.loop_) + ms(t_.options_.write_timeout);
    if (!keep) {
      linger();
      return;
    }
    setState(State::kIdle);
    seq_ = ++t_.next_seq_;
    deadline_ms_ = uv_now(t_.loop_) + ms(t_.options_.keepalive_timeout);
    drive();
  }

  // A stream's body bytes. False (and the connection closed without telling the handler) when
  // the client lets more than the cap queue up: a reader that stalls must not fill memory.
  bool send(std::string_view bytes) {
    if (state_ != State::kStreaming) return false;
    if (stream_.pendingBytes() + bytes.size() > t_.options_.max_stream_queue_bytes) {
      spdlog::warn(
          "{}: dropping the stream to {}: its client is not reading ({} bytes queued, {} more)",
          t_.options_.name, peer_host_, stream_.pendingBytes(), bytes.size());
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
    if (state_ == State::kLingering) {
      lingered_ += len;
      if (lingered_ > kMaxLingerBytes) close();
      return;
    }
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
  static uint64_t ms(std::chrono::milliseconds d) { return static_cast<uint64_t>(d.count()); }

  // After a last answer: shut the write side once the answer is out, then read and drop until
  // the client's FIN, kMaxLingerBytes or linger_timeout. Closing a socket with unread input
  // sends RST, and the client's kernel may then discard the answer before the client reads it.
  // TLS ends with close_notify instead (the Stream sends it), then closes.
  void linger() {
    in_.clear();
    if (stream_.tlsActive()) {
      setState(State::kClosing);
      stream_.closeWhenFlushed();
      return;
    }
    setState(State::kLingering);
    // Until the answer is out the write timeout bounds the wait; onShutdown starts the linger.
    deadline_ms_ =
        uv_now(t_.loop_) + ms(t_.options_.write_timeout) + ms(t_.options_.linger_timeout);
    if ((!stream_.reading() && stream_.startRead() != 0) ||
        uv_shutdown(&shutdown_req_, stream_.handle(), &Connection::onShutdown) != 0) {
      close();
    }
  }
  // Runs after the queued writes (libuv orders them), or with UV_ECANCELED when the handle is
  // closed, always before onStreamClosed: the Connection is still there.
  static void onShutdown(uv_shutdown_t* req, int status) {
    auto* c = static_cast<Connection*>(req->data);
    if (c->state_ != State::kLingering) return;
    if (status < 0) {
      c->close();
      return;
    }
    c->deadline_ms_ = uv_now(c->t_.loop_) + ms(c->t_.options_.linger_timeout);
  }

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
      const auto [status, n] = parser_.feed(in_);
      in_.erase(0, n);
      if (state_ == State::kIdle &&
          (parser_.inRequest() || status == HttpRequestParser::Status::kRequest)) {
        setState(State::kReading);
        deadline_ms_ = uv_now(t_.loop_) + ms(t_.options_.read_timeout);
      }
      if (status == HttpRequestParser::Status::kError) {
        driving_ = false;
        const int code = parser_.errorStatus();
        t_.refused(code == 413 || code == 431 ? HttpRefusal::kTooLarge : HttpRefusal::kMalformed,
                   code);
        fail(code, parser_.errorText());
        return;
      }
      if (parser_.takeContinue()) {
        stream_.out() += "HTTP/1.1 100 Continue\r\n\r\n";
        if (stream_.flush() != 0) {
          driving_ = false;
          close();
          return;
        }
        write_deadline_ms_ = uv_now(t_.loop_) + ms(t_.options_.write_timeout);
      }
      if (status == HttpRequestParser::Status::kNeedMore) break;
      setState(State::kWaiting);
      exchange_ = ++t_.next_exchange_;
      t_.exchanges_[exchange_] = this;
      HttpRequest req = parser_.take();
      req.peer_host = peer_host_;
      req.loopback = isLoopback(peer_host_);
      keep_alive_ = parser_.keepAlive();
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

  HttpTransport& t_;
  Stream stream_;
  HttpRequestParser parser_;
  uint64_t seq_;
  uv_shutdown_t shutdown_req_{};
  State state_ = State::kIdle;
  std::string in_;
  std::string peer_host_;
  uint64_t deadline_ms_ = 0;
  uint64_t write_deadline_ms_ = 0;
  uint64_t exchange_ = 0;
  uint64_t answered_ = 0;
  size_t lingered_ = 0;
  bool keep_alive_ = true;
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
  const std::string what = options_.name + ".listen " + options_.listen + ": ";
  if (closing_ || handles_open_ > 0) return Status::fail(what + "already started");
  auto addr = parseHttpListenAddress(options_.listen);
  if (!addr.ok()) return Status::fail(what + addr.error());
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
      return Status::fail(what + uv_strerror(rc));
    }
  } else if (int rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&*addr), 0);
             rc != 0) {
    close();
    return Status::fail(what + uv_strerror(rc));
  }
  if (int rc =
          uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 128, &HttpTransport::onConnection);
      rc != 0) {
    close();
    return Status::fail(what + uv_strerror(rc));
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
  if (openConnections() >= options_.max_connections) {
    // Make room: the connection that has waited longest without a request in hand goes (it can
    // reconnect), then one lingering after its last answer; else the newcomer is refused.
    Connection* victim = nullptr;
    for (const bool lingering : {false, true}) {
      for (auto& [p, c] : conns_) {
        const auto s = c->state();
        const bool candidate =
            lingering ? s == Connection::State::kLingering
                      : s == Connection::State::kIdle || s == Connection::State::kReading;
        if (candidate && (!victim || c->seq() < victim->seq())) victim = p;
      }
      if (victim) break;
    }
    if (victim) {
      if (victim->state() != Connection::State::kLingering) refused(HttpRefusal::kEvicted, 0);
      victim->close();
    }
  }
  auto c = std::make_unique<Connection>(*this);
  Connection* raw = c.get();
  conns_.emplace(raw, std::move(c));
  if (raw->accept(reinterpret_cast<uv_stream_t*>(&listener_)) != 0) {
    raw->close();
    return;
  }
  if (openConnections() > options_.max_connections) {
    refused(HttpRefusal::kOverCapacity, 503);
    raw->fail(503, "too many connections");
  }
}

size_t HttpTransport::openConnections() const {
  size_t open = 0;
  for (auto& [p, conn] : conns_) open += conn->state() != Connection::State::kClosing;
  return open;
}

void HttpTransport::refused(HttpRefusal why, int status) {
  if (handler_) handler_->onHttpRefused(why, status);
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
    const bool timed = s == Connection::State::kIdle || s == Connection::State::kReading ||
                       s == Connection::State::kLingering;
    if ((timed && now >= c->deadline()) ||
        (s != Connection::State::kClosing && c->writeStalled(now))) {
      late.push_back(p);
    }
  }
  for (Connection* c : late) {
    if (c->state() == Connection::State::kReading && !c->writeStalled(now)) {
      self->refused(HttpRefusal::kReadTimeout, 408);
      c->fail(408, "request not received in time");
      continue;
    }
    // A client that never sent a request is a read timeout too; an idle keep-alive one is not.
    if (c->state() == Connection::State::kIdle && !c->answeredAny()) {
      self->refused(HttpRefusal::kReadTimeout, 0);
    }
    c->close();
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

Result<sockaddr_storage> parseHttpListenAddress(std::string_view text) {
  std::string host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Error{"expected [address]:port"};
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon)
      return Error{"expected host:port"};
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return Error{"invalid port"};
  }
  const int port = std::stoi(std::string(port_text));
  if (port > 65535) return Error{"invalid port"};
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_storage addr{};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr)) == 0) return addr;
  addr = {};
  if (uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr)) == 0) return addr;
  return Error{"not a numeric IP address: " + host};
}

}  // namespace pgwarden::net
