// Client session: its lifecycle. Construction and accept, state changes, reading and framing the
// client's input (startup packet, cancel requests, backpressure), and ending: ReadyForQuery
// bookkeeping, idle and startup timeouts, detaching and closing. The rest of ClientSession lives in
// client_session_login.cpp (authentication), client_session_client.cpp (client -> server and
// statement runs), client_session_server.cpp (server -> client) and client_session_agent.cpp
// (agent context, budgets, the statement gate and the cost gate's EXPLAIN). Together they are the
// proxy data path with its queue of what the server still owes, which lets pgwarden answer a
// denied statement in its proper place in a pipelined batch, cap rows per portal, and record
// every statement once.
// Message flow: https://www.postgresql.org/docs/15/protocol-flow.html

#include "session/client_session.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>

#include "common/log_text.h"
#include "session/auth_limiter.h"

namespace pgwarden::session {

namespace {

// How long a closing session waits for its last bytes (a FATAL message) to drain.
constexpr uint64_t kCloseFlushMs = 5000;
// How long a refused client may take to send its StartupMessage before it hears why anyway.
constexpr uint64_t kRejectWaitMs = 1000;

// The caps a client's message must fit (the server's are the pool's).
protocol::FrameLimits clientLimits(const config::Config& config) {
  protocol::FrameLimits limits;
  limits.max_message = static_cast<uint32_t>(config.limits.max_message_bytes);
  limits.max_bind = static_cast<uint32_t>(config.limits.max_bind_bytes);
  return limits;
}

}  // namespace

ClientSession::ClientSession(SessionHost& host, uint64_t id, bool via_unix)
    : host_(host),
      id_(id),
      config_(host.config()),
      client_(host.loop(), this, via_unix, clientLimits(*config_)),
      prepared_(static_cast<size_t>(config_->limits.max_prepared_statements)),
      pause_(id) {}

StatementGate& ClientSession::gate() {
  if (!gate_) {
    // The server database is known only after the login: the statistics follow it.
    GateServices services = host_.gateServices({});
    services.stats = [this] { return host_.tableStats(caller_.server_database); };
    gate_ = std::make_unique<StatementGate>(std::move(services), *this,
                                            [this](GateVerdict v) { onGateVerdict(std::move(v)); });
  }
  return *gate_;
}

ClientSession::~ClientSession() { cancelWaits(); }

int ClientSession::accept(uv_stream_t* listener) {
  int rc = client_.init();
  if (rc != 0) return rc;
  ++host_.counters().clients_current;
  return started(client_->acceptFrom(listener));
}

int ClientSession::adopt(int fd) {
  int rc = client_.init();
  if (rc != 0) {
    ::close(fd);
    return rc;
  }
  ++host_.counters().clients_current;
  return started(client_->adoptFd(fd));
}

int ClientSession::started(int rc) {
  if (rc != 0) {
    setState(ClientState::kClosing);
    client_->close();
    return rc;
  }
  client_.opened(host_.nowMs(), static_cast<uint64_t>(config_->limits.startup_timeout.count()));
  rc = client_->startRead();
  if (rc != 0) closeSession("cannot read from the client");
  return 0;
}

std::string ClientSession::logPrefix() const {
  // Every value but the id is the client's (or its address): escaped, so none can end the line.
  std::string p = "s" + std::to_string(id_);
  const auto add = [&p](const char* key, const std::string& value) {
    if (value.empty()) return;
    p.append(" ").append(key).append("=");
    appendLogText(p, value);
  };
  add("user", caller_.user);
  add("db", caller_.database);
  p += " peer=";
  appendLogText(p, client_.peer());
  add("agent_id", caller_.agentId());
  add("conversation_id", caller_.conversationId());
  return p;
}

void ClientSession::setState(ClientState to) {
  if (to == state_) return;
  if (!legalTransition(state_, to)) {
    spdlog::error("{}: illegal state change {} -> {}", logPrefix(), stateName(state_),
                  stateName(to));
  }
  const auto starting = [](ClientState s) {
    return s == ClientState::kStartup || s == ClientState::kAuth;
  };
  if (starting(state_) && !starting(to)) host_.leftStartup(id_);
  state_ = to;
  if (to == ClientState::kReady) login_.reset();  // the login is over
}

void ClientSession::rejectAfterStartup(std::string sqlstate, std::string message,
                                       metrics::RejectReason reason) {
  if (login_) login_->rejectAfterStartup({std::move(sqlstate), std::move(message), reason});
  client_.deadlineNoLaterThan(host_.nowMs() + kRejectWaitMs);
}

void ClientSession::flushClient() {
  if (client_->open() && client_->flush() != 0) closeSession("write to the client failed");
}

void ClientSession::flushServer() {
  if (server_ && server_->flush() != 0) server_->close("write to the server failed");
}

// ---------------------------------------------------------------------------------------------
// Input from the client
// ---------------------------------------------------------------------------------------------

void ClientSession::onStreamData(net::Stream&, const char* data, size_t len) {
  client_.received(data, len, host_.nowMs());
  processInput();
}

void ClientSession::processInput() {
  while (true) {
    switch (state_) {
      case ClientState::kStartup:
        if (!handleStartupPacket()) goto done;
        continue;
      case ClientState::kAuth: {
        protocol::Frame f;
        const auto st = client_.in().next(f, client_.limits(), false);
        if (st == protocol::FrameStatus::kNeedMore) goto done;
        if (st != protocol::FrameStatus::kFrame) {
          protocolViolation("invalid message length during authentication");
          goto done;
        }
        // Taken off the buffer before it is handled, so nothing the handler does to the buffer
        // can pull the frame from under it.
        const std::string raw(f.raw);
        client_.in().consume(raw.size());
        protocol::Frame own{raw[0], raw, std::string_view(raw).substr(5)};
        if (!handleAuthMessage(own)) goto done;
        continue;
      }
      case ClientState::kAcquiring:
      case ClientState::kAttaching:
        // Anything the client sends early waits in the buffer; keep that bounded.
        client_.boundWaitingInput();
        goto done;
      case ClientState::kReady: {
        if (client_.clientPaused()) goto done;
        if (pause_.paused()) {
          // A statement waits for its verdict (a webhook, the cost gate, the budget store), a
          // server connection, a write's savepoint, ...: keep what piles up behind it bounded.
          client_.boundWaitingInput();
          goto done;
        }
        protocol::Frame f;
        const auto st = client_.in().next(f, client_.limits(), false);
        if (st == protocol::FrameStatus::kNeedMore) goto done;
        if (st == protocol::FrameStatus::kTooLarge) {
          protocolViolation(protocol::messageName(client_.in().data()[0], false) +
                            " message is larger than the limit (limits.max_message_bytes / "
                            "limits.max_bind_bytes)");
          goto done;
        }
        if (st != protocol::FrameStatus::kFrame) {
          protocolViolation("invalid message length");
          goto done;
        }
        if (consoleHolds(f)) {
          // Held until RESUME: reading stops, so what the client sends meanwhile stays in the
          // socket (bounded by the kernel), not in our memory.
          pause_.move(PauseReason::kConsoleHold);
          client_->stopRead();
          goto done;
        }
        // Guarded writes: a transaction past its age (or idle time) is rolled back before the
        // next statement is judged, not only when the janitor finds the session idle.
        if (writes_ && f.type != protocol::fe::kTerminate) writesTick(host_.nowMs());
        if (writes_ && waitForTxnState(f)) goto done;
        if (server_.transactionPooled() && !server_ && !admin_ && !replies_.skipping() &&
            needsServer(f.type) && !takeServer()) {
          // Waiting for a server connection: the message stays in the buffer until one comes.
          continue;
        }
        if (admin_ && admin_->gather(f, [this] {
              pause_.move(PauseReason::kNone);
              processInput();
            })) {
          // The console asks the other loops first; the message waits in the buffer.
          pause_.move(PauseReason::kConsoleGather);
          goto done;
        }
        const bool go_on = handleClientMessage(f);
        client_.in().consume(f.raw.size());  // a paused message keeps a copy of its own
        if (!go_on || pause_.paused()) goto done;
        if (replies_.full() ||
            (server_ && server_->pendingBytes() > config_->limits.client_write_buffer)) {
          updateBackpressure();
        }
        continue;
      }
      case ClientState::kClosing:
      case ClientState::kClosed:
        goto done;
    }
  }
done:
  flushServer();
  flushClient();
  updateBackpressure();
  returnServerIfIdle();
}

void ClientSession::updateBackpressure() {
  if (state_ != ClientState::kReady) return;
  const uint64_t limit = config_->limits.client_write_buffer;
  // Client -> server: stop reading the client while the server has not taken what we sent.
  const bool server_full = (server_ && server_->pendingBytes() > limit) || replies_.full();
  if (server_full && !client_.clientPaused()) {
    client_.pauseClient();
  } else if (!server_full && client_.clientPaused() && !shutting_down_ &&
             (!server_ || server_->pendingBytes() <= limit / 2)) {
    if (client_.resumeClient() != 0) {
      closeSession("cannot read from the client");
      return;
    }
    if (client_.in().size() > 0) processInput();
  }
  // Server -> client: stop reading the server while the client is slow to take its results.
  if (!server_) return;
  if (client_->pendingBytes() > limit) {
    if (client_.pauseServer()) server_->pauseReading();
  } else if (client_->pendingBytes() <= limit / 2 && client_.resumeServer()) {
    server_->resumeReading();
  }
}

void ClientSession::checkStall(uint64_t now_ms) {
  const auto limit = static_cast<uint64_t>(config_->limits.client_stall_timeout.count());
  const uint64_t stalled = client_.stalledMs(now_ms, limit > 0 && server_);
  if (stalled == 0 || stalled < limit) return;
  ++host_.counters().clients_stalled;
  spdlog::warn(
      "{}: closing: the client took none of its results for {} ms while holding server "
      "connection {} (limits.client_stall_timeout); cancelling its statement",
      logPrefix(), stalled, server_->id());
  // 08006, not 57014: the statement is not what failed, the connection is (the client stopped
  // taking its data), and a driver that sees class 08 treats the connection as gone rather
  // than retrying the statement on it. The statement's record says `aborted` with this text.
  terminate("08006", "terminating connection: the client read none of its results for " +
                         std::to_string(limit) +
                         " ms while they held a server connection (limits.client_stall_timeout)");
}

bool ClientSession::handleStartupPacket() {
  protocol::StartupPacket pkt;
  size_t used = 0;
  std::string err;
  const auto st = protocol::parseStartup(std::string_view(client_.in().data(), client_.in().size()),
                                         pkt, used, err);
  if (st == protocol::StartupStatus::kNeedMore) return false;
  if (st == protocol::StartupStatus::kBad) {
    protocolViolation("invalid startup packet: " + err);
    return false;
  }
  client_.in().consume(used);
  switch (pkt.kind) {
    case protocol::StartupKind::kSslRequest:
      // TLS when configured, over TCP only (libpq never asks on a Unix socket).
      if (config_->tls.enabled() && !client_->isUnix()) {
        if (client_->tlsActive()) {
          protocolViolation("SSLRequest received inside TLS");
          return false;
        }
        // Bytes behind the SSLRequest were sent before the client saw our answer, so they are
        // cleartext that must not pass for TLS-protected input (CVE-2021-23214).
        if (client_.in().size() > 0) {
          protocolViolation("received unencrypted data after SSL request");
          return false;
        }
        client_->out().push_back('S');
        auto engine = net::TlsEngine::makeServer(config_->tls.context);
        if (!engine.ok() || client_->flush() != 0 ||
            !client_->startTls(std::move(engine.value())).ok()) {
          closeSession(engine.ok() ? "cannot start TLS" : "cannot start TLS: " + engine.error());
          return false;
        }
        return true;
      }
      client_->out().push_back('N');
      return true;
    case protocol::StartupKind::kGssEncRequest:
      // No GSS encryption: 'N', and the client carries on in plaintext or leaves.
      client_->out().push_back('N');
      return true;
    case protocol::StartupKind::kCancel:
      ++host_.counters().cancel_requests_received;
      host_.handleCancelRequest(pkt.cancel_pid, pkt.cancel_key);
      closeSession("cancel request");
      return false;
    case protocol::StartupKind::kStartup:
      break;
  }

  if (login_ && login_->reject()) {
    for (const auto& [n, v] : pkt.params) {
      if (n == "user") caller_.user = v;
      if (n == "database") caller_.database = v;
    }
    const Login::Reject r = *login_->reject();
    fatal(r.sqlstate, r.message, r.reason);
    return false;
  }
  auto filtered = filterStartupParams(pkt.params);
  if (filtered.startup) {
    caller_.user = filtered.startup->user;
    caller_.database = filtered.startup->database;
  }
  // tls.mode require: a TCP client that did not come through TLS hears what to change.
  if (config_->tls.mode == net::TlsMode::kRequire && !client_->tlsActive() && !client_->isUnix()) {
    spdlog::warn("{}: startup refused: TLS is required (tls.mode require)", logPrefix());
    fatal("28000", "pgwarden requires TLS: connect with sslmode=require",
          metrics::RejectReason::kNotAllowed);
    return false;
  }
  if (!filtered.startup) {
    for (const auto& [n, v] : pkt.params) {
      if (n == "user") caller_.user = v;
      if (n == "database") caller_.database = v;
    }
    spdlog::warn("{}: startup refused: {}", logPrefix(),
                 logsafe(filtered.refusal.message, kLogMessageMaxBytes));
    fatal(filtered.refusal.sqlstate, filtered.refusal.message, metrics::RejectReason::kNotAllowed);
    return false;
  }
  ClientStartup& s = *filtered.startup;
  caller_.client_params = std::move(s.params);
  caller_.search_path = std::move(s.search_path);
  caller_.application_name = std::move(s.application_name);
  caller_.startAgent(std::move(s.agent_id), std::move(s.conversation_id),
                     std::move(s.query_intent));
  if (protocol::protocolMinor(pkt.version) > 0 || !s.unrecognized_protocol_options.empty()) {
    protocol::writeNegotiateProtocolVersion(client_->out(), 0, s.unrecognized_protocol_options);
  }
  if (host_.shuttingDown()) {
    fatal("57P03", "the database system is shutting down", metrics::RejectReason::kShutdown);
    return false;
  }
  const AuthLimiter::Block block = host_.authLimiter().blocked(
      client_.peerHost(), AuthLimiter::userCredential(caller_.user), host_.nowMs(),
      {config_->auth.failed_attempts_per_minute, config_->auth.failed_attempts_per_address});
  if (block != AuthLimiter::Block::kNone) {
    // Refused before any password is checked; other users from this address still log in,
    // unless the address itself failed too often.
    const char* whose = block == AuthLimiter::Block::kCredential ? "for this user from this address"
                                                                 : "from this address";
    ++host_.counters().auth_failures;
    spdlog::warn("{}: refused: too many failed logins {} this minute", logPrefix(), whose);
    fatal("28000",
          std::string("too many failed login attempts ") + whose +
              "; wait a minute before trying again",
          metrics::RejectReason::kAuthFailure);
    return false;
  }
  beginAuth();
  return state_ == ClientState::kAuth || state_ == ClientState::kAcquiring ||
         state_ == ClientState::kAttaching || state_ == ClientState::kReady;
}

// ---------------------------------------------------------------------------------------------
// Ending
// ---------------------------------------------------------------------------------------------

void ClientSession::releaseServer(bool client_gone) {
  pool::ServerConnection* s = server_.detach();
  if (!s) return;
  if (client_.resumeServer()) s->resumeReading();
  // A Query behind unfinished extended-protocol messages is answered only if none of them fails
  // (after an error the server skips everything up to the Sync): how many ReadyForQuery are
  // still owed is then unknown, and a drain that waits for one too many would hold the
  // connection until its deadline. Such a connection is closed instead.
  const int owed = replies_.owedIsUncertain() ? -1 : replies_.rfqOwed();
  const bool need_sync = replies_.unsyncedTail();
  if (replies_.running()) {
    // The client will never read this result: stop the server working on it.
    host_.cancelServerQuery(s->backendPid(), s->backendKey(), s->cancelFence());
  }
  if (!replies_.empty() || prepared_.anyPortal()) {
    if (client_gone && !ended_.message.empty()) {
      // pgwarden ended the session (fatal()), the client did not leave: the record keeps the
      // FATAL the client was sent, which says why.
      finishAllPending(history::Outcome::kAborted, ended_.message, ended_.sqlstate);
    } else {
      finishAllPending(client_gone ? history::Outcome::kClientGone : history::Outcome::kOk,
                       client_gone ? "the client disconnected before the statement finished" : "");
    }
  }
  s->release(owed, need_sync);
}

void ClientSession::closeSession(const std::string& reason) {
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  if (writes_) writesSessionEnd();
  cancelWaits();
  const ClientState before = state_;
  if (pool::Pool* pool = pause_.pool()) {
    pool->cancelWait(this);
    pause_.serverWaitOver();
  }
  const bool mid_statement = !replies_.empty();
  if (server_) releaseServer(mid_statement);
  finishPortals();
  cancel_key_.unregister(host_);
  auto& c = host_.counters();
  if (before == ClientState::kReady && c.clients_ready > 0) --c.clients_ready;
  if (before != ClientState::kStartup || !caller_.user.empty()) {
    const uint64_t ms = host_.nowMs() - client_.connectedAtMs();
    spdlog::info("{}: disconnected after {}.{:03}s, {} statement{}: {}", logPrefix(), ms / 1000,
                 ms % 1000, statement_count_, statement_count_ == 1 ? "" : "s",
                 logsafe(reason, kLogMessageMaxBytes));
  } else {
    spdlog::debug("{}: closed before startup: {}", logPrefix(),
                  logsafe(reason, kLogMessageMaxBytes));
  }
  setState(ClientState::kClosing);
  client_.setDeadline(host_.nowMs() + kCloseFlushMs);
  client_->closeWhenFlushed();
}

void ClientSession::fatal(const std::string& sqlstate, const std::string& message,
                          metrics::RejectReason reason) {
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  if (state_ != ClientState::kReady) host_.counters().reject(reason);
  protocol::writeError(client_->out(), "FATAL", sqlstate, message);
  ended_ = FatalSent{sqlstate, message};
  closeSession(message);
}

void ClientSession::terminate(const std::string& sqlstate, const std::string& message) {
  fatal(sqlstate, message, metrics::RejectReason::kShutdown);
}

void ClientSession::protocolViolation(const std::string& message) {
  ++host_.counters().protocol_errors;
  spdlog::warn("{}: protocol violation: {}", logPrefix(), logsafe(message, kLogMessageMaxBytes));
  fatal("08P01", message, metrics::RejectReason::kBadProtocol);
}

void ClientSession::onStreamEnd(net::Stream&, int status) {
  if (status == UV_EPROTO && !client_->tlsError().empty()) {
    // Certificate and protocol problems are the operator's to fix: say so above debug level.
    spdlog::warn("{}: TLS: {}", logPrefix(), logsafe(client_->tlsError()));
    closeSession("TLS: " + client_->tlsError());
    return;
  }
  closeSession(status == UV_EOF ? "client closed the connection"
                                : std::string("client read error: ") + uv_strerror(status));
}

void ClientSession::onStreamClosed(net::Stream&) {
  setState(ClientState::kClosed);
  auto& c = host_.counters();
  if (c.clients_current > 0) --c.clients_current;
  host_.onSessionClosed(this);
}

void ClientSession::cancelFromClient() {
  // The client's write already finished while pgwarden settles its savepoint (or rolls back an
  // expired transaction): a cancel then would only break pgwarden's own step.
  if (!replies_.empty() && replies_.front().writeStep() != WriteStep::kNone &&
      replies_.front().writeStep() != WriteStep::kSavepoint) {
    return;
  }
  if (server_ && !replies_.empty()) {
    host_.cancelServerQuery(server_->backendPid(), server_->backendKey(), server_->cancelFence());
  }
}

bool ClientSession::consoleHolds(const protocol::Frame& f) const {
  if (admin_ || f.type == protocol::fe::kTerminate) return false;
  const ConsoleHolds h = host_.consoleHolds(caller_.database);
  if (h.suspended) return true;
  return h.paused && replies_.empty() && server_.txStatus() == 'I' && !replies_.unsynced();
}

void ClientSession::consoleResumed() {
  if (pause_.reason() != PauseReason::kConsoleHold) return;
  pause_.move(PauseReason::kNone);
  resumeInput();
}

void ClientSession::beginShutdown() {
  shutting_down_ = true;
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  if (state_ != ClientState::kReady || replies_.empty()) {
    terminate("57P01", "terminating connection: pgwarden is shutting down");
    return;
  }
  // Busy: let the current statement finish, read nothing new.
  client_.pauseClient();
}

// What a quiet session holds beyond its own object goes back: the gate, the queue's ring, the
// buffers grown by its login and its last statements, and those of the server connection it
// keeps. Each is made again by the next message that needs it.
void ClientSession::trimIdle() {
  if (gate_ && !gate_->waiting() && !pause_.holdsMessage()) gate_.reset();
  replies_.release();
  client_.trim();
  if (server_.conn() != nullptr) server_->trimIdle();
}

void ClientSession::tick(uint64_t now_ms) {
  switch (state_) {
    case ClientState::kStartup:
    case ClientState::kAuth:
      if (now_ms >= client_.deadlineMs() && login_ && login_->reject()) {
        const Login::Reject r = *login_->reject();
        fatal(r.sqlstate, r.message, r.reason);
      } else if (now_ms >= client_.deadlineMs()) {
        spdlog::info("{}: startup timeout", logPrefix());
        fatal("57014", "canceling authentication due to timeout", metrics::RejectReason::kStartupTimeout);
      }
      break;
    case ClientState::kReady:
      checkStall(now_ms);
      if (state_ != ClientState::kReady) break;
      if (writes_) writesTick(now_ms);
      if (replies_.empty() && server_.txStatus() == 'I' && !client_.trimmed() &&
          client_.idleMs(now_ms) >= pool::kIdleTrimMs) {
        trimIdle();
      }
      if (config_->limits.client_idle_timeout.count() > 0 && replies_.empty() &&
          server_.txStatus() == 'I' &&
          client_.idleMs(now_ms) >=
              static_cast<uint64_t>(config_->limits.client_idle_timeout.count())) {
        terminate("57P05", "terminating connection due to idle-session timeout");
      }
      break;
    case ClientState::kClosing:
      if (now_ms >= client_.deadlineMs()) client_->close();
      break;
    case ClientState::kAttaching:
      if (login_ && login_->statsWaitOver(now_ms, false)) {
        spdlog::info("{}: catalog statistics still loading; going on without them", logPrefix());
        finishAttach();
      }
      break;
    case ClientState::kAcquiring:
    case ClientState::kClosed:
      break;
  }
}

}  // namespace pgwarden::session
