// Server connection: connect, hand messages to the attached session (streaming huge rows in
// pieces), and drain/reset before going back to the pool. The login is in server_login.cpp.
#include "pool/server_conn.h"

#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "guards/fixed_settings.h"

namespace pgwarden::pool {

namespace {

// How long a connection may take to come back to ReadyForQuery after its client left mid-query
// (it was cancelled, so this is a safety net) or to finish DISCARD ALL.
constexpr uint64_t kDrainGraceMs = 5000;

}  // namespace

void ServerWaiter::onConnectionReady(PooledConnection& c) {
  if (auto* s = dynamic_cast<ServerConnection*>(&c)) {
    onServerReady(*s);
    return;
  }
  spdlog::error("server {}: lent by a pool whose factory does not make server connections", c.id());
  c.close("not a server connection");
  onServerFailed("XX000", "internal error: no server connection");
}

ServerConnection::ServerConnection(Pool& pool, uint64_t id)
    : pool_(pool),
      id_(id),
      config_(pool.settings()),
      stream_(pool.manager().loop(), this),
      resolver_(pool.manager().loop()),
      statements_(static_cast<size_t>(config_->pool.max_prepared_statements)),
      fence_(std::make_shared<CancelFence>()) {
  // A cancel answered after the connection went idle: it may be lent again now.
  fence_->cleared = [this] {
    if (state_ == ServerState::kIdle) pool_.onLendable();
  };
}

ServerConnection::~ServerConnection() { fence_->cleared = nullptr; }

namespace {

std::string_view findParameter(const std::shared_ptr<const ParamList>& list, std::string_view name) {
  if (list == nullptr) return {};
  for (const auto& [n, v] : *list) {
    if (n == name) return v;
  }
  return {};
}

}  // namespace

std::string_view ServerConnection::loginParameter(std::string_view name) const {
  return findParameter(login_params_, name);
}

void ServerConnection::setState(ServerState to) {
  if (to == state_) return;
  if (!legalTransition(state_, to)) {
    spdlog::error("server {}: illegal state change {} -> {}", id_, stateName(state_),
                  stateName(to));
  }
  auto& c = pool_.manager().counters();
  if (state_ == ServerState::kIdle && c.server_idle > 0) --c.server_idle;
  if (state_ == ServerState::kActive && c.server_active > 0) --c.server_active;
  if (to == ServerState::kIdle) ++c.server_idle;
  if (to == ServerState::kActive) ++c.server_active;
  state_ = to;
}

const ParamList& ServerConnection::parameters() const {
  static const ParamList kNone;
  return params_ != nullptr ? *params_ : kNone;
}

std::string_view ServerConnection::parameter(std::string_view name) const {
  return findParameter(params_, name);
}

void ServerConnection::noteParameter(std::string_view name, std::string_view value) {
  if (params_ != nullptr) {
    for (const auto& [n, v] : *params_) {
      if (n == name && v == value) return;
    }
  }
  // The list is this connection's alone while it logs in (edited in place); once shared with
  // the pool's other connections, or kept as the login's, a change copies it.
  std::shared_ptr<ParamList> list;
  if (params_ != nullptr && params_.use_count() == 1) {
    list = std::const_pointer_cast<ParamList>(params_);
  } else {
    list = params_ != nullptr ? std::make_shared<ParamList>(*params_) : std::make_shared<ParamList>();
    if (params_ == nullptr) list->reserve(16);  // what PostgreSQL 15 reports at login: 14
  }
  for (auto& [n, v] : *list) {
    if (n == name) {
      v.assign(value);
      params_ = std::move(list);
      return;
    }
  }
  list->emplace_back(std::string(name), std::string(value));
  params_ = std::move(list);
}

std::string_view ServerConnection::unreportedValue(std::string_view name) const {
  for (const auto& [n, v] : unreported_) {
    if (n == name) return v;
  }
  return {};
}

void ServerConnection::noteUnreported(std::string_view name, std::string_view value) {
  for (auto& [n, v] : unreported_) {
    if (n == name) {
      v = std::string(value);
      return;
    }
  }
  unreported_.emplace_back(std::string(name), std::string(value));
}

void ServerConnection::start() {
  auto& c = pool_.manager().counters();
  ++c.server_connects;
  deadline_ms_ = pool_.manager().nowMs() + static_cast<uint64_t>(config_->upstream.connect_timeout.count());
  int rc = net::initUpstreamStream(config_->upstream, stream_);
  if (rc != 0) {
    state_ = ServerState::kClosing;
    last_error_ = std::string("socket: ") + uv_strerror(rc);
    c.connectError(metrics::ConnectFailure::kOther);
    c.serverLogin(false, pool_.manager().nowMs());
    pool_.onLoginFailed(*this, last_error_);
    pool_.onClosed(*this);
    return;
  }
  ++c.server_current;
  const bool needs_lookup = !config_->upstream.hostIsSocketDir() && [&] {
    sockaddr_storage ss{};
    return uv_ip4_addr(config_->upstream.host.c_str(), 0, reinterpret_cast<sockaddr_in*>(&ss)) != 0 &&
           uv_ip6_addr(config_->upstream.host.c_str(), 0, reinterpret_cast<sockaddr_in6*>(&ss)) != 0;
  }();
  state_ = needs_lookup ? ServerState::kResolving : ServerState::kConnecting;
  rc = net::connectUpstream(config_->upstream, stream_, resolver_, [this](int status) {
    fail(std::string("cannot resolve the upstream host: ") + uv_strerror(status));
  });
  if (rc != 0) {
    failLogin(rc == UV_ECONNREFUSED || rc == UV_ENOENT ? metrics::ConnectFailure::kRefused
                                                       : metrics::ConnectFailure::kOther,
              std::string("connect: ") + uv_strerror(rc));
  }
}

void ServerConnection::onStreamConnected(net::Stream&, int status) {
  if (status != 0) {
    // Nothing listens there (a TCP port, or a socket file that is not there): refused.
    failLogin(status == UV_ECONNREFUSED || status == UV_ENOENT ? metrics::ConnectFailure::kRefused
                                                               : metrics::ConnectFailure::kOther,
              std::string("connect: ") + uv_strerror(status));
    return;
  }
  if (state_ == ServerState::kResolving) setState(ServerState::kConnecting);
  setState(ServerState::kLogin);
  if (stream_.startRead() != 0) {
    fail("cannot read from the server");
    return;
  }
  // upstream.sslmode: ask for TLS first, over TCP only (libpq does not use TLS on a socket).
  if (config_->upstream.tls.context && !config_->upstream.hostIsSocketDir()) {
    ssl_requested_ = true;
    protocol::writeSslRequest(stream_.out());
    if (stream_.flush() != 0) fail("cannot write to the server");
    return;
  }
  sendStartup();
}

void ServerConnection::onStreamTlsReady(net::Stream&) {
  spdlog::debug("server {} db={}: TLS with the server: {}", id_, logsafe(pool_.database()),
                stream_.tls()->describe());
  sendStartup();
}

void ServerConnection::onStreamTlsError(net::Stream&) {
  fail("TLS with the server failed: " + stream_.tlsError());
}

void ServerConnection::attach(ServerLink* link, uint64_t holder) {
  link_ = link;
  holder_ = holder;
  ++assignments_;
  setState(ServerState::kActive);
}

void ServerConnection::giveBack() {
  if (state_ != ServerState::kActive) return;
  link_ = nullptr;
  holder_ = 0;
  dropHold();
  if (paused_) resumeReading();
  setState(ServerState::kIdle);
  idle_since_ms_ = pool_.manager().nowMs();
  pool_.onIdle(*this);
}

void ServerConnection::release(int rfq_expected, bool need_sync) {
  if (state_ != ServerState::kActive) return;
  link_ = nullptr;
  if (rfq_expected < 0) {
    close("released in a state that cannot be drained");
    return;
  }
  // A huge message still arriving in pieces (chunk_left_) is skipped by the drain below; so is
  // one the session held, read by the drain.
  dropHold();
  if (paused_) resumeReading();
  if (rfq_expected <= 0 && !need_sync) {
    beginReset();
    return;
  }
  setState(ServerState::kDraining);
  rfq_expected_ = rfq_expected;
  if (need_sync) {
    protocol::writeSync(stream_.out());
    ++rfq_expected_;
  }
  // Messages the session forwarded just before it let go (a Query read together with the bad
  // message that ended the session) may still be queued: they are part of what is owed, so
  // they go out now, or the ReadyForQuery the drain waits for would never come.
  if (stream_.flush() != 0) {
    fail("cannot write to the server");
    return;
  }
  deadline_ms_ = pool_.manager().nowMs() +
                 static_cast<uint64_t>(config_->upstream.statement_timeout.count()) + kDrainGraceMs;
  // Bytes already buffered belong to the drained statement. When we are inside processActive()
  // (the session let go while handling a server message) its loop carries on in the new state.
  if (!processing_) processActive();
}

void ServerConnection::beginReset() {
  setState(ServerState::kResetting);
  holder_ = 0;
  // DISCARD ALL deallocates every prepared statement.
  statements_.clear();
  unnamed_owner_ = 0;
  rfq_expected_ = 0;
  if (tx_status_ != 'I') {
    protocol::writeQuery(stream_.out(), "ROLLBACK");
    ++rfq_expected_;
  }
  // Two messages, not one multi-statement Query: DISCARD ALL refuses to run inside the implicit
  // transaction block a multi-statement Query makes.
  protocol::writeQuery(stream_.out(), "DISCARD ALL");
  ++rfq_expected_;
  deadline_ms_ = pool_.manager().nowMs() + kDrainGraceMs;
  if (stream_.flush() != 0) fail("cannot write to the server");
}

void ServerConnection::pauseReading() {
  if (paused_) return;
  paused_ = true;
  stream_.stopRead();
}

void ServerConnection::resumeReading() {
  if (!paused_) return;
  paused_ = false;
  if (stream_.open() && stream_.startRead() != 0) fail("cannot read from the server");
}

void ServerConnection::holdInput() {
  if (held_) return;
  held_ = true;
  if (!paused_) stream_.stopRead();
}

bool ServerConnection::dropHold() {
  if (!held_) return true;
  held_ = false;
  redeliver_ = false;
  if (!paused_ && stream_.open() && stream_.startRead() != 0) {
    fail("cannot read from the server");
    return false;
  }
  return true;
}

void ServerConnection::releaseInput() {
  if (!held_ || !dropHold()) return;
  if (processing_) {
    redeliver_ = true;  // the loop handing the message over carries on with it
    return;
  }
  if (state_ == ServerState::kActive) processActive();
}

void ServerConnection::close(const std::string& why) {
  if (state_ == ServerState::kClosing || state_ == ServerState::kClosed) return;
  const ServerState before = state_;
  setState(ServerState::kClosing);
  resolver_.cancel();
  if (last_error_.empty()) last_error_ = why;
  ServerLink* link = link_;
  link_ = nullptr;
  if (stream_.open()) {
    // A polite Terminate when the connection is healthy; the server logs no "unexpected EOF".
    if (before == ServerState::kIdle) {
      protocol::writeTerminate(stream_.out());
      (void)stream_.flush();
    }
    stream_.close();
  }
  if (before == ServerState::kResolving || before == ServerState::kConnecting ||
      before == ServerState::kLogin) {
    pool_.manager().counters().connectError(failure_);
    pool_.manager().counters().serverLogin(false, pool_.manager().nowMs());
    pool_.onLoginFailed(*this, last_error_);
  } else if (link) {
    ++pool_.manager().counters().server_lost;
    link->onServerLost(*this, why);
  }
  if (stream_.closed()) onStreamClosed(stream_);
}

void ServerConnection::failLogin(metrics::ConnectFailure kind, const std::string& why) {
  failure_ = kind;
  fail(why);
}

void ServerConnection::fail(const std::string& why) {
  if (state_ == ServerState::kClosing || state_ == ServerState::kClosed) return;
  if (last_error_.empty()) last_error_ = why;
  if (state_ == ServerState::kIdle) {
    spdlog::info("server {} db={}: closed while idle: {}", id_, logsafe(pool_.database()),
                 logsafe(why, kLogMessageMaxBytes));
  } else {
    spdlog::warn("server {} db={}: {} (state {})", id_, logsafe(pool_.database()),
                 logsafe(why, kLogMessageMaxBytes), stateName(state_));
  }
  close(why);
}

void ServerConnection::tick(uint64_t now_ms) {
  switch (state_) {
    case ServerState::kResolving:
    case ServerState::kConnecting:
    case ServerState::kLogin:
      if (now_ms >= deadline_ms_) failLogin(metrics::ConnectFailure::kTimeout, "connect timeout");
      break;
    case ServerState::kResetting:
    case ServerState::kDraining:
      if (now_ms >= deadline_ms_) fail("did not come back to ReadyForQuery in time");
      break;
    case ServerState::kIdle:
      if (trimmed_idle_since_ms_ != idle_since_ms_ && now_ms - idle_since_ms_ >= kIdleTrimMs) {
        trimmed_idle_since_ms_ = idle_since_ms_;
        trimIdle();
      }
      break;
    case ServerState::kActive:
    case ServerState::kClosing:
    case ServerState::kClosed:
      break;
  }
}

void ServerConnection::trimIdle() {
  if (processing_) return;
  in_.release();
  stream_.releaseIdleBuffers();
}

void ServerConnection::onStreamData(net::Stream&, const char* data, size_t len) {
  if (ssl_requested_) {
    // The one-byte answer to our SSLRequest. Bytes behind it were sent in clear before any
    // handshake, so they cannot be trusted as server messages (CVE-2021-23222).
    ssl_requested_ = false;
    const net::UpstreamTlsConfig& tls = config_->upstream.tls;
    if (len > 1) {
      fail("received unencrypted data after the server's SSL response");
    } else if (data[0] == 'S') {
      auto engine = net::TlsEngine::makeClient(tls.context, config_->upstream.host);
      if (!engine.ok()) {
        fail("TLS with the server failed: " + engine.error());
      } else if (!stream_.startTls(std::move(engine.value())).ok()) {
        fail("cannot start TLS with the server");
      }
    } else if (data[0] == 'N' && tls.sslmode == net::UpstreamSslMode::kPrefer) {
      sendStartup();
    } else if (data[0] == 'N') {
      fail(std::string("the server does not accept TLS and upstream.sslmode is ") +
           net::upstreamSslModeName(tls.sslmode));
    } else {
      fail("the server did not answer the SSLRequest with S or N");
    }
    return;
  }
  in_.append(data, len);
  processActive();
}

// Reads whole messages (and pieces of huge ones) out of the buffer and dispatches them by
// state. The state may change under a handler (a client leaves, a reset ends), so it is looked
// at again for every message.
void ServerConnection::processActive() {
  processing_ = true;
  processInput();
  processing_ = false;
}

void ServerConnection::processInput() {
  bool delivered = false;
  while (state_ != ServerState::kClosing && state_ != ServerState::kClosed && !held_) {
    if (chunk_left_ > 0) {
      const size_t n = std::min(chunk_left_, in_.size());
      if (n == 0) break;
      chunk_left_ -= n;
      if (state_ == ServerState::kActive && link_) {
        link_->onServerChunk(*this, chunk_type_, std::string_view(in_.data(), n), false,
                             chunk_left_ == 0);
        delivered = true;
      }
      in_.consume(n);
      continue;
    }
    if (in_.size() >= 5 && state_ == ServerState::kActive) {
      const char type = in_.data()[0];
      const size_t total = size_t(protocol::readU32(in_.data() + 1)) + 1;
      if (protocol::backendMessage(type).streams && total > kStreamThreshold &&
          in_.size() < total && total <= size_t(limits_.max_backend) + 1) {
        const size_t n = in_.size();
        chunk_type_ = type;
        chunk_left_ = total - n;
        link_->onServerChunk(*this, type, std::string_view(in_.data(), n), true, false);
        delivered = true;
        in_.consume(n);
        continue;
      }
    }
    protocol::Frame f;
    const auto st = in_.next(f, limits_, true);
    if (st == protocol::FrameStatus::kNeedMore) break;
    if (st != protocol::FrameStatus::kFrame) {
      fail("malformed message from the server");
      return;
    }
    bool ok = true;
    switch (state_) {
      case ServerState::kLogin: ok = handleLoginMessage(f); break;
      case ServerState::kActive:
        if (f.type == protocol::be::kParameterStatus) ok = watchParameter(f);
        if (ok && link_) {
          link_->onServerMessage(*this, f);
          delivered = true;
        }
        break;
      case ServerState::kResetting: ok = handleResetMessage(f); break;
      case ServerState::kDraining: ok = handleDrainMessage(f); break;
      case ServerState::kIdle: ok = handleIdleMessage(f); break;
      case ServerState::kResolving:
      case ServerState::kConnecting:
      case ServerState::kClosing:
      case ServerState::kClosed:
        ok = false;
        break;
    }
    if (!ok) return;
    if (held_) break;  // the link took nothing: the message waits for releaseInput()
    if (redeliver_) {
      redeliver_ = false;
      continue;  // held and released within its handling: handed over again
    }
    in_.consume(f.raw.size());
  }
  if (delivered && link_ && state_ == ServerState::kActive) link_->onServerReadDone(*this);
}

bool ServerConnection::watchParameter(const protocol::Frame& f) {
  auto p = protocol::parseParameterStatus(f.body);
  if (!p) {
    fail("malformed ParameterStatus from the server");
    return false;
  }
  noteParameter(p->name, p->value);
  if (!pool_.writes() && p->name == "default_transaction_read_only" && p->value != "on") {
    // Someone changed the server under us (ALTER ROLE/DATABASE, a SET we did not stop): this
    // connection is no longer one we may hand to anybody.
    read_only_lost_ = true;
    fail("the server reported default_transaction_read_only=" + std::string(p->value) +
         "; ending the session");
    return false;
  }
  if (!guards::serverReportAccepted(p->name, p->value)) {
    // A SET pgwarden did not see (a function's SET, a DO block): the next texts would be split
    // and read by the server otherwise than pgwarden reads them.
    lexical_lost_ = std::string(p->name) + "=" + std::string(p->value);
    fail("the server reported " + lexical_lost_ + "; ending the session");
    return false;
  }
  return true;
}

bool ServerConnection::handleResetMessage(const protocol::Frame& f) {
  switch (f.type) {
    case protocol::be::kParameterStatus:
      return watchParameter(f);
    case protocol::be::kErrorResponse: {
      auto e = protocol::parseErrorFields(f.body);
      fail("reset failed: " + (e ? std::string(e->message()) : std::string("?")));
      return false;
    }
    case protocol::be::kReadyForQuery: {
      auto z = protocol::parseReadyForQuery(f.body);
      if (!z) {
        fail("malformed ReadyForQuery from the server");
        return false;
      }
      tx_status_ = z->status;
      if (--rfq_expected_ > 0) return true;
      if (tx_status_ != 'I') {
        fail("still in a transaction after reset");
        return false;
      }
      unreported_.clear();
      setState(ServerState::kIdle);
      idle_since_ms_ = pool_.manager().nowMs();
      pool_.onIdle(*this);
      return true;
    }
    default:
      return true;  // CommandComplete, notices
  }
}

bool ServerConnection::handleDrainMessage(const protocol::Frame& f) {
  switch (f.type) {
    case protocol::be::kParameterStatus:
      return watchParameter(f);
    case protocol::be::kCopyInResponse:
      // A COPY FROM STDIN the client will never feed: end it.
      protocol::writeCopyFail(stream_.out(), "client disconnected");
      if (stream_.flush() != 0) {
        fail("cannot write to the server");
        return false;
      }
      return true;
    case protocol::be::kReadyForQuery: {
      auto z = protocol::parseReadyForQuery(f.body);
      if (!z) {
        fail("malformed ReadyForQuery from the server");
        return false;
      }
      tx_status_ = z->status;
      if (--rfq_expected_ <= 0) beginReset();
      return true;
    }
    default:
      return true;
  }
}

bool ServerConnection::handleIdleMessage(const protocol::Frame& f) {
  switch (f.type) {
    case protocol::be::kParameterStatus:
      return watchParameter(f);
    case protocol::be::kNoticeResponse:
    case protocol::be::kNotificationResponse:
      return true;
    case protocol::be::kErrorResponse: {
      auto e = protocol::parseErrorFields(f.body);
      fail("the server ended the idle connection: " +
           (e ? std::string(e->message()) : std::string("?")));
      return false;
    }
    default:
      fail(std::string("unexpected message '") + f.type + "' on an idle connection");
      return false;
  }
}

void ServerConnection::onStreamEnd(net::Stream&, int status) {
  fail(status == UV_EOF ? "the server closed the connection"
                        : std::string("read error: ") + uv_strerror(status));
}

void ServerConnection::onStreamWritten(net::Stream&, int status) {
  if (status != 0) {
    fail(std::string("write error: ") + uv_strerror(status));
    return;
  }
  if (link_ && state_ == ServerState::kActive) link_->onServerWritten(*this);
}

void ServerConnection::onStreamClosed(net::Stream&) {
  if (state_ == ServerState::kClosed) return;
  auto& c = pool_.manager().counters();
  if (c.server_current > 0) --c.server_current;
  setState(ServerState::kClosed);
  pool_.onClosed(*this);
}

}  // namespace pgwarden::pool
