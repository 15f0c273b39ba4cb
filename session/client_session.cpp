// Client session: startup, authentication, attach, and the proxy data path with its queue of
// what the server still owes. That queue is what lets pgwarden answer a denied statement in its
// proper place in a pipelined batch, cap rows per portal, and record every statement once.
// Message flow: https://www.postgresql.org/docs/15/protocol-flow.html
#include "session/client_session.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>

#include "common/log_text.h"
#include "guards/codes.h"
#include "session/result_screen.h"
#include "session/admin_console.h"
#include "daemon/daemon.h"
#include "daemon/daemon_metrics.h"

namespace pgwarden::daemon {

namespace {

using history::wallClockMicros;

// Server-side parameters that the server does not report with ParameterStatus (PG 15).
bool isReportedParam(std::string_view name) {
  return name != "extra_float_digits" && name != "search_path";
}

std::string quoteLiteral(std::string_view v) {
  std::string out;
  const bool backslash = v.find('\\') != std::string_view::npos;
  if (backslash) out.push_back('E');
  out.push_back('\'');
  for (char c : v) {
    if (c == '\'') out.push_back('\'');
    if (c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

// A tag with its count replaced ("SELECT 1001" -> "SELECT 1000").
std::string retag(std::string_view tag, int64_t count) {
  const auto sp = tag.rfind(' ');
  if (sp == std::string_view::npos) return std::string(tag);
  return std::string(tag.substr(0, sp + 1)) + std::to_string(count);
}

bool isZeroCell(std::string_view v) {
  if (v == "0") return true;
  if (v.size() == 2 || v.size() == 4 || v.size() == 8) {
    for (char c : v) {
      if (c != 0) return false;
    }
    return true;
  }
  return false;
}

// A RowDescription of one text column with the given format code (0 text, 1 binary), for the
// SHOW pgwarden.* answers (protocol::writeRowDescription always says text).
// https://www.postgresql.org/docs/15/protocol-message-formats.html (RowDescription)
void writeTextColumn(std::string& out, std::string_view name, int16_t format) {
  auto put16 = [&out](uint16_t v) {
    out.push_back(static_cast<char>(v >> 8));
    out.push_back(static_cast<char>(v & 0xff));
  };
  auto put32 = [&out](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  out.push_back('T');
  put32(static_cast<uint32_t>(4 + 2 + name.size() + 1 + 4 + 2 + 4 + 2 + 4 + 2));
  put16(1);
  out.append(name);
  out.push_back('\0');
  put32(0);          // table oid
  put16(0);          // column number
  put32(25);         // text
  put16(0xffff);     // typlen -1
  put32(0xffffffff); // typmod -1
  put16(static_cast<uint16_t>(format));
}

// Most queued client messages tolerated before we stop reading the client (pipelining).
constexpr size_t kMaxPendingEntries = 65536;
// Longest wait for a database's first catalog statistics before the first ReadyForQuery.
constexpr uint64_t kStatsWaitMs = 3000;
// How long a closing session waits for its last bytes (a FATAL message) to drain.
constexpr uint64_t kCloseFlushMs = 5000;
// How long a refused client may take to send its StartupMessage before it hears why anyway.
constexpr uint64_t kRejectWaitMs = 1000;

// A portal replaced by a new Bind or closed ends its run here only when no Execute of that run
// still waits for the server (a suspended portal). In a pipeline (Bind, Execute, Bind, Execute,
// ..., Sync) the server's answer to the Execute finishes the run, with its rows or its error.
template <typename PendingQueue>
bool awaitingServer(const PendingQueue& pending, const std::shared_ptr<StatementRun>& run) {
  for (const auto& p : pending) {
    if (p.run == run) return true;
  }
  return false;
}

}  // namespace

ClientSession::ClientSession(Daemon& daemon, uint64_t id, bool via_unix)
    : daemon_(daemon),
      id_(id),
      config_(daemon.config()),
      client_(daemon.loop(), this),
      via_unix_(via_unix) {
  limits_.max_message = static_cast<uint32_t>(config_->limits.max_message_bytes);
  limits_.max_bind = static_cast<uint32_t>(config_->limits.max_bind_bytes);
  GateServices services;
  services.policy = &daemon.policy();
  services.webhooks = daemon.webhooks();
  services.budgets = daemon.budgets();
  services.stats = [this] { return daemon_.tableStats(server_database_); };
  gate_ = std::make_unique<StatementGate>(std::move(services), *this,
                                          [this](GateVerdict v) { onGateVerdict(std::move(v)); });
}

ClientSession::~ClientSession() { cancelWaits(); }

int ClientSession::accept(uv_stream_t* listener) {
  int rc = via_unix_ ? client_.initPipe() : client_.initTcp();
  if (rc != 0) return rc;
  ++daemon_.counters().clients_current;
  rc = client_.acceptFrom(listener);
  if (rc != 0) {
    setState(ClientState::kClosing);
    client_.close();
    return rc;
  }
  peer_ = client_.peerName();
  peer_host_ = client_.peerHost();
  connected_ms_ = daemon_.nowMs();
  last_active_ms_ = connected_ms_;
  deadline_ms_ = connected_ms_ + static_cast<uint64_t>(config_->limits.startup_timeout.count());
  rc = client_.startRead();
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
  add("user", user_);
  add("db", database_);
  p += " peer=";
  appendLogText(p, peer_);
  add("agent_id", agent_id_);
  add("conversation_id", conversation_id_);
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
  if (starting(state_) && !starting(to)) daemon_.leftStartup(id_);
  state_ = to;
}

void ClientSession::rejectAfterStartup(std::string sqlstate, std::string message,
                                       RejectReason reason) {
  startup_reject_ = StartupReject{std::move(sqlstate), std::move(message), reason};
  deadline_ms_ = std::min(deadline_ms_, daemon_.nowMs() + kRejectWaitMs);
}

void ClientSession::flushClient() {
  if (client_.open() && client_.flush() != 0) closeSession("write to the client failed");
}

void ClientSession::flushServer() {
  if (server_ && server_->flush() != 0) server_->close("write to the server failed");
}

// ---------------------------------------------------------------------------------------------
// Input from the client
// ---------------------------------------------------------------------------------------------

void ClientSession::onStreamData(Stream&, const char* data, size_t len) {
  last_active_ms_ = daemon_.nowMs();
  in_.append(data, len);
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
        const auto st = in_.next(f, limits_, false);
        if (st == protocol::FrameStatus::kNeedMore) goto done;
        if (st != protocol::FrameStatus::kFrame) {
          protocolViolation("invalid message length during authentication");
          goto done;
        }
        // Taken off the buffer before it is handled, so nothing the handler does to the buffer
        // can pull the frame from under it.
        const std::string raw(f.raw);
        in_.consume(raw.size());
        protocol::Frame own{raw[0], raw, std::string_view(raw).substr(5)};
        if (!handleAuthMessage(own)) goto done;
        continue;
      }
      case ClientState::kAcquiring:
      case ClientState::kAttaching:
        // Anything the client sends early waits in the buffer; keep that bounded.
        if (in_.size() > limits_.max_bind + 5u) client_.stopRead();
        goto done;
      case ClientState::kReady: {
        if (client_paused_) goto done;
        if (!paused_.empty()) {
          // A statement waits for its verdict (a webhook, the cost gate, the budget store);
          // keep what piles up behind it bounded.
          if (in_.size() > limits_.max_bind + 5u) client_.stopRead();
          goto done;
        }
        protocol::Frame f;
        const auto st = in_.next(f, limits_, false);
        if (st == protocol::FrameStatus::kNeedMore) goto done;
        if (st == protocol::FrameStatus::kTooLarge) {
          protocolViolation("message of type " +
                            std::to_string(static_cast<unsigned char>(in_.data()[0])) +
                            " is larger than the limit (limits.max_message_bytes / "
                            "limits.max_bind_bytes)");
          goto done;
        }
        if (st != protocol::FrameStatus::kFrame) {
          protocolViolation("invalid message length");
          goto done;
        }
        const bool go_on = handleClientMessage(f);
        in_.consume(f.raw.size());  // a paused message keeps a copy of its own
        if (!go_on || !paused_.empty()) goto done;
        if (pending_.size() > kMaxPendingEntries ||
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
}

void ClientSession::updateBackpressure() {
  if (state_ != ClientState::kReady) return;
  const uint64_t limit = config_->limits.client_write_buffer;
  // Client -> server: stop reading the client while the server has not taken what we sent.
  const bool server_full =
      (server_ && server_->pendingBytes() > limit) || pending_.size() > kMaxPendingEntries;
  if (server_full && !client_paused_) {
    client_paused_ = true;
    client_.stopRead();
  } else if (!server_full && client_paused_ && !shutting_down_ &&
             (!server_ || server_->pendingBytes() <= limit / 2)) {
    client_paused_ = false;
    if (client_.startRead() != 0) {
      closeSession("cannot read from the client");
      return;
    }
    if (in_.size() > 0) processInput();
  }
  // Server -> client: stop reading the server while the client is slow to take its results.
  if (!server_) return;
  if (client_.pendingBytes() > limit) {
    if (!server_paused_) {
      server_paused_ = true;
      server_->pauseReading();
    }
  } else if (server_paused_ && client_.pendingBytes() <= limit / 2) {
    server_paused_ = false;
    server_->resumeReading();
  }
}

bool ClientSession::handleStartupPacket() {
  protocol::StartupPacket pkt;
  size_t used = 0;
  std::string err;
  const auto st = protocol::parseStartup(std::string_view(in_.data(), in_.size()), pkt, used, err);
  if (st == protocol::StartupStatus::kNeedMore) return false;
  if (st == protocol::StartupStatus::kBad) {
    protocolViolation("invalid startup packet: " + err);
    return false;
  }
  in_.consume(used);
  switch (pkt.kind) {
    case protocol::StartupKind::kSslRequest:
      // TLS when configured, over TCP only (libpq never asks on a Unix socket).
      if (config_->tls.enabled() && !client_.isUnix()) {
        if (client_.tlsActive()) {
          protocolViolation("SSLRequest received inside TLS");
          return false;
        }
        // Bytes behind the SSLRequest were sent before the client saw our answer, so they are
        // cleartext that must not pass for TLS-protected input (CVE-2021-23214).
        if (in_.size() > 0) {
          protocolViolation("received unencrypted data after SSL request");
          return false;
        }
        client_.out().push_back('S');
        auto engine = TlsEngine::makeServer(config_->tls.context);
        if (!engine.ok() || client_.flush() != 0 ||
            !client_.startTls(std::move(engine.value())).ok()) {
          closeSession(engine.ok() ? "cannot start TLS" : "cannot start TLS: " + engine.error());
          return false;
        }
        return true;
      }
      client_.out().push_back('N');
      return true;
    case protocol::StartupKind::kGssEncRequest:
      // No GSS encryption: 'N', and the client carries on in plaintext or leaves.
      client_.out().push_back('N');
      return true;
    case protocol::StartupKind::kCancel:
      ++daemon_.counters().cancel_requests_received;
      daemon_.handleCancelRequest(pkt.cancel_pid, pkt.cancel_key);
      closeSession("cancel request");
      return false;
    case protocol::StartupKind::kStartup:
      break;
  }

  if (startup_reject_) {
    for (const auto& [n, v] : pkt.params) {
      if (n == "user") user_ = v;
      if (n == "database") database_ = v;
    }
    const StartupReject r = *startup_reject_;
    fatal(r.sqlstate, r.message, r.reason);
    return false;
  }
  auto filtered = filterStartupParams(pkt.params);
  if (filtered.startup) {
    user_ = filtered.startup->user;
    database_ = filtered.startup->database;
  }
  // tls.mode require: a TCP client that did not come through TLS hears what to change.
  if (config_->tls.mode == TlsMode::kRequire && !client_.tlsActive() && !client_.isUnix()) {
    spdlog::warn("{}: startup refused: TLS is required (tls.mode require)", logPrefix());
    fatal("28000", "pgwarden requires TLS: connect with sslmode=require",
          RejectReason::kNotAllowed);
    return false;
  }
  if (!filtered.startup) {
    for (const auto& [n, v] : pkt.params) {
      if (n == "user") user_ = v;
      if (n == "database") database_ = v;
    }
    spdlog::warn("{}: startup refused: {}", logPrefix(),
                 logsafe(filtered.refusal.message, kLogMessageMaxBytes));
    fatal(filtered.refusal.sqlstate, filtered.refusal.message, RejectReason::kNotAllowed);
    return false;
  }
  ClientStartup& s = *filtered.startup;
  client_params_ = std::move(s.params);
  search_path_ = std::move(s.search_path);
  application_name_ = std::move(s.application_name);
  agent_id_ = std::move(s.agent_id);
  conversation_id_ = std::move(s.conversation_id);
  query_intent_ = std::move(s.query_intent);
  if (protocol::protocolMinor(pkt.version) > 0 || !s.unrecognized_protocol_options.empty()) {
    protocol::writeNegotiateProtocolVersion(client_.out(), 0, s.unrecognized_protocol_options);
  }
  if (daemon_.shuttingDown()) {
    fatal("57P03", "the database system is shutting down", RejectReason::kShutdown);
    return false;
  }
  if (daemon_.authLimiter().blocked(peer_host_, daemon_.nowMs(),
                                    config_->auth.failed_attempts_per_minute)) {
    ++daemon_.counters().auth_failures;
    spdlog::warn("{}: refused: too many failed logins from this address", logPrefix());
    fatal("28000",
          "too many failed login attempts from this address; wait a minute before trying again",
          RejectReason::kAuthFailure);
    return false;
  }
  beginAuth();
  return state_ == ClientState::kAuth || state_ == ClientState::kAcquiring ||
         state_ == ClientState::kAttaching || state_ == ClientState::kReady;
}

// ---------------------------------------------------------------------------------------------
// Authentication (client -> pgwarden)
// ---------------------------------------------------------------------------------------------

void ClientSession::beginAuth() {
  user_config_ = config_->findUser(user_);
  const UserConfig* password_user = user_config_;
  std::string unknown_reason = "no such user";
  if (user_config_ && user_config_->method == AuthMethod::kTrust) {
    if (via_unix_) {
      authenticated();
      return;
    }
    // Answered like a name that does not exist, so a probe over TCP cannot find trust users;
    // only the log says what happened.
    password_user = nullptr;
    unknown_reason = "trust user tried to connect over TCP (trust is for the Unix socket only)";
  }
  const AuthConfig& a = config_->auth;
  const UnknownUserAuth unknown{a.unknown_user_method, a.unknown_scram_iterations,
                                a.unknown_scram_salt_len, daemon_.saltKey()};
  auth_ = std::make_unique<ClientAuth>(password_user, user_, unknown, std::move(unknown_reason));
  auth_->begin(client_.out());
  setState(ClientState::kAuth);
}

bool ClientSession::handleAuthMessage(const protocol::Frame& f) {
  if (!auth_) {
    protocolViolation("unexpected password message");
    return false;
  }
  ClientAuth::Outcome o = auth_->handle(f.type, f.body, client_.out());
  switch (o.verdict) {
    case ClientAuth::Verdict::kContinue:
      return true;
    case ClientAuth::Verdict::kOk:
      auth_.reset();
      authenticated();
      return state_ != ClientState::kClosing && state_ != ClientState::kClosed;
    case ClientAuth::Verdict::kFailed:
      auth_.reset();
      authFailed(o.reason);
      return false;
    case ClientAuth::Verdict::kProtocolViolation:
      auth_.reset();
      protocolViolation(o.reason);
      return false;
  }
  return false;
}

void ClientSession::authFailed(const std::string& log_reason) {
  auto& c = daemon_.counters();
  ++c.auth_failures;
  const int n = daemon_.authLimiter().recordFailure(peer_host_, daemon_.nowMs());
  spdlog::warn("{}: authentication failed: {} ({} failure{} from this address this minute)",
               logPrefix(), log_reason, n, n == 1 ? "" : "s");
  // Exactly PostgreSQL's words, and the same whether the user exists or not.
  fatal("28P01", "password authentication failed for user \"" + user_ + "\"",
        RejectReason::kAuthFailure);
}

void ClientSession::authenticated() {
  protocol::writeAuthOk(client_.out());
  if (database_ == AdminConsole::kDatabase) {
    if (!config_->isAdmin(user_)) {
      fatal("42501", "user \"" + user_ + "\" is not an admin user (admin_users)",
            RejectReason::kNotAllowed);
      return;
    }
    admin_ = std::make_unique<AdminConsole>(daemon_, id_, user_);
    admin_->setClient(peer_host_, application_name_);
    AdminConsole::writeWelcome(client_.out());
    setState(ClientState::kReady);
    ++daemon_.counters().clients_ready;
    spdlog::info("{}: admin console opened", logPrefix());
    return;
  }
  const auto mapped = config_->upstream.mapDatabase(database_);
  if (!mapped) {
    fatal("3D000", "database \"" + database_ + "\" does not exist", RejectReason::kNotAllowed);
    return;
  }
  server_database_ = *mapped;
  group_ = user_config_->group;
  policy_ = config_->findGroup(group_);
  if (search_path_) {
    if (!config_->groupAllowsSearchPath(group_)) {
      fatal("42501",
            "parameter \"search_path\" is not allowed for users of group \"" + group_ +
                "\": pgwarden resolves table names against the group's own search_path",
            RejectReason::kNotAllowed);
      return;
    }
    client_params_.emplace_back("search_path", *search_path_);
  }
  daemon_.registerCancelKey(this, key_pid_, key_secret_);
  key_registered_ = true;
  setState(ClientState::kAcquiring);
  Pool& pool = daemon_.pools().pool(server_database_);
  waiting_pool_ = &pool;
  pool.acquire(this);  // onServerReady or onServerFailed comes on a later loop turn
}

void ClientSession::onServerReady(ServerConnection& c) {
  waiting_pool_ = nullptr;
  server_ = &c;
  c.attach(this);
  tx_status_ = c.txStatus();
  setState(ClientState::kAttaching);
  startAttach();
}

void ClientSession::onServerFailed(const std::string& sqlstate, const std::string& message) {
  waiting_pool_ = nullptr;
  spdlog::warn("{}: no server connection: {}", logPrefix(), logsafe(message, kLogMessageMaxBytes));
  fatal(sqlstate, message,
        sqlstate == "53300" ? RejectReason::kAcquireTimeout : RejectReason::kUnreachable);
}

void ClientSession::startAttach() {
  // Apply the client's own parameters where the pooled connection differs; the server reports
  // the new values with ParameterStatus, which the connection records.
  std::string sql;
  for (const auto& [name, value] : client_params_) {
    if (isReportedParam(name)) {
      if (server_->parameter(name) == value) continue;
    } else {
      const auto current = server_->unreportedValue(name);
      if (!current.empty() && current == value) continue;
      server_->noteUnreported(name, value);
    }
    sql += "SET " + name + " = " + quoteLiteral(value) + ";";
  }
  if (sql.empty()) {
    finishAttach();
    return;
  }
  Pending p(Expect::kInternal);
  pending_.push_back(std::move(p));
  protocol::writeQuery(server_->out(), sql);
  flushServer();
}

void ClientSession::onStatsReady() {
  if (state_ != ClientState::kAttaching || stats_wait_until_ms_ == 0) return;
  stats_wait_until_ms_ = 0;
  finishAttach();
}

void ClientSession::finishAttach() {
  if (!stats_checked_) {
    stats_checked_ = true;
    // The database answered a login, so it exists: keep catalog statistics for it.
    daemon_.watchDatabase(server_database_);
    if (daemon_.waitForStats(server_database_, id_)) {
      stats_wait_until_ms_ = daemon_.nowMs() + kStatsWaitMs;
      return;
    }
  }
  setState(ClientState::kReady);
  ++daemon_.counters().clients_ready;
  std::string& out = client_.out();
  for (const auto& [n, v] : server_->parameters()) protocol::writeParameterStatus(out, n, v);
  protocol::writeBackendKeyData(out, key_pid_, key_secret_);
  protocol::writeReadyForQuery(out, server_->txStatus());
  spdlog::info("{}: connected group={} application_name={} server_db={} via={}", logPrefix(),
               group_, logsafe(application_name_), logsafe(server_database_),
               via_unix_ ? "unix" : "tcp");
  if (client_.open() && !client_.reading() && !client_paused_) {
    if (client_.startRead() != 0) {
      closeSession("cannot read from the client");
      return;
    }
  }
  processInput();
}

// ---------------------------------------------------------------------------------------------
// Proxying: client -> server
// ---------------------------------------------------------------------------------------------

bool ClientSession::handleClientMessage(const protocol::Frame& f) {
  if (admin_) {
    if (admin_->onMessage(f, client_.out())) return true;
    closeSession("client sent Terminate");
    return false;
  }
  if (deny_skipping_ || server_skipping_) {
    // As PostgreSQL itself does after an error in an extended-protocol batch: everything up to
    // the next Sync is ignored.
    if (f.type == 'S') {
      deny_skipping_ = false;
      server_skipping_ = false;
      skipped_.end();
      pushPending(Pending(Expect::kSync));
      forward(f);
      return true;
    }
    if (f.type == 'X') {
      closeSession("client sent Terminate");
      return false;
    }
    noteSkipped(f);
    return true;
  }
  if ((f.type == 'S' || f.type == 'H' || f.type == 'X') && !f.body.empty()) {
    protocolViolation(std::string("invalid message format: ") +
                      (f.type == 'S' ? "Sync" : f.type == 'H' ? "Flush" : "Terminate") +
                      " carries no body");
    return false;
  }
  if ((!agent_statements_.empty() || !agent_portals_.empty()) && handleAgentMessage(f)) return true;
  switch (f.type) {
    case 'Q': return handleQuery(f);
    case 'P': return handleParse(f);
    case 'B': return handleBind(f);
    case 'E': return handleExecute(f);
    case 'C': return handleClose(f);
    case 'D': {
      auto d = protocol::parseDescribe(f.body);
      if (!d) {
        protocolViolation("malformed Describe message: " + d.error());
        return false;
      }
      pushPending(Pending(d->kind == 'S' ? Expect::kDescribeStatement : Expect::kDescribePortal));
      forward(f);
      return true;
    }
    case 'S':
      pushPending(Pending(Expect::kSync));
      forward(f);
      return true;
    case 'H':
      forward(f);
      return true;
    case 'X':
      closeSession("client sent Terminate");
      return false;
    case 'F': {
      std::string out;
      protocol::writeError(out, "ERROR", "0A000",
                           "the fast-path function call interface is not supported through "
                           "pgwarden; call the function in a SELECT instead");
      queueLocal(std::move(out), true);
      return true;
    }
    case 'd':
    case 'c':
    case 'f':
      // CopyData/CopyDone/CopyFail outside COPY FROM STDIN (which pgwarden never starts):
      // ignored, as PostgreSQL ignores them.
      return true;
    case 'p':
      protocolViolation("unexpected password message after authentication");
      return false;
    default:
      protocolViolation(std::string("invalid frontend message type ") +
                        std::to_string(static_cast<int>(static_cast<unsigned char>(f.type))));
      return false;
  }
}

void ClientSession::forward(const protocol::Frame& f) {
  if (!server_) return;
  server_->out().append(f.raw.data(), f.raw.size());
  switch (f.type) {
    case 'P': case 'B': case 'D': case 'E': case 'C': case 'H':
      unsynced_ = true;
      break;
    case 'S':
      unsynced_ = false;
      break;
    default:
      break;
  }
}

void ClientSession::pushPending(Pending p) { pending_.push_back(std::move(p)); }

void ClientSession::writeDeny(std::string& out, const StatementPlan& plan) {
  writeDeny(out, plan.decision.deny);
}

void ClientSession::writeDeny(std::string& out, const guards::Verdict& v) {
  std::vector<protocol::Field> fields;
  fields.push_back({'S', "ERROR"});
  fields.push_back({'V', "ERROR"});
  fields.push_back({'C', v.sqlstate.empty() ? std::string_view("42501") : v.sqlstate});
  fields.push_back({'M', v.message});
  if (!v.detail.empty()) fields.push_back({'D', v.detail});
  if (!v.hint.empty()) fields.push_back({'H', v.hint});
  std::string position;
  if (v.position > 0) {
    position = std::to_string(v.position);
    fields.push_back({'P', position});
  }
  protocol::writeErrorResponse(out, fields);
}

void ClientSession::writeWarnings(std::string& out, const StatementPlan& plan) {
  writeWarnings(out, plan.decision.warnings);
}

void ClientSession::writeWarnings(std::string& out, const std::vector<guards::Verdict>& warnings) {
  for (const auto& w : warnings) {
    protocol::writeNotice(out, "WARNING", w.sqlstate.empty() ? std::string_view("01000") : w.sqlstate,
                          w.message, w.detail, w.hint);
    ++daemon_.counters().warnings_sent;
  }
}

bool ClientSession::handleQuery(const protocol::Frame& f) {
  auto q = protocol::parseQuery(f.body);
  if (!q) {
    protocolViolation("malformed Query message: " + q.error());
    return false;
  }
  auto cmd = guards::parseAgentCommand(q->sql);
  if (cmd.kind != guards::AgentCommand::Kind::kNone) {
    cmd.text = std::string(q->sql);
    return answerAgentCommand(cmd);
  }
  GateRequest r;
  r.sql = std::string(q->sql);
  r.overrides = guards::parseSqlComment(q->sql);
  r.admit = true;
  r.explain = GateRequest::Explain::kRun;
  return judge(f, std::move(r));
}

bool ClientSession::actQuery(const protocol::Frame& f, GateVerdict v) {
  std::shared_ptr<const StatementPlan> plan = std::move(v.plan);
  if (!v.explain_error.empty()) {
    // The cost gate's EXPLAIN failed: its error (and the ReadyForQuery after it) answers the Query.
    recordExplainFailure(plan, false, v.explain_error);
    queueLocal(std::move(v.explain_error), true);
    return true;
  }
  const auto& d = plan->decision;
  if (d.denied) {
    recordDenied(*plan, false);
    std::string out;
    writeDeny(out, *plan);
    queueLocal(std::move(out), true);
    return true;
  }
  if (!d.warnings.empty()) {
    std::string out;
    writeWarnings(out, *plan);
    queueLocal(std::move(out), false);
  }
  Pending p(Expect::kQuery);
  const bool empty_text = plan->analysis && plan->analysis->ok && plan->analysis->statements.empty();
  p.overrides = overrides_;
  if (!empty_text) {
    p.run = startRun(plan, 0, false);
    p.run->budget_key = std::move(v.budget_key);
    p.run->overrides = overrides_;
    p.next_statement = 1;
  } else {
    p.next_statement = plan->statements.size();
  }
  p.plan = plan;
  if (d.rewritten_sql) {
    ++daemon_.counters().rewrites;
    protocol::writeQuery(server_->out(), *d.rewritten_sql);
  } else {
    forward(f);
  }
  pushPending(std::move(p));
  return true;
}

bool ClientSession::handleParse(const protocol::Frame& f) {
  auto m = protocol::parseParse(f.body);
  if (!m) {
    protocolViolation("malformed Parse message: " + m.error());
    return false;
  }
  const std::string name(m->statement);
  if (!name.empty() && !statements_.count(name) &&
      statements_.size() >= static_cast<size_t>(config_->limits.max_prepared_statements)) {
    std::string out;
    protocol::writeError(out, "ERROR", "54000",
                         "too many prepared statements in this session (limit " +
                             std::to_string(config_->limits.max_prepared_statements) +
                             "); close the ones you no longer need");
    queueLocal(std::move(out), false);
    skipBatch("54000", false);
    return true;
  }
  auto cmd = guards::parseAgentCommand(m->sql);
  if (cmd.kind != guards::AgentCommand::Kind::kNone) {
    cmd.text = std::string(m->sql);
    return handleAgentParse(*m, cmd);
  }
  if (const auto a = agent_statements_.find(name); a != agent_statements_.end()) {
    if (!name.empty()) {
      std::string out;
      protocol::writeError(out, "ERROR", "42P05", "prepared statement \"" + name + "\" already exists");
      queueLocal(std::move(out), false);
      skipBatch("42P05", false);
      return true;
    }
    agent_statements_.erase(a);
  }
  GateRequest r;
  r.sql = std::string(m->sql);
  r.overrides = guards::parseSqlComment(m->sql);
  r.extended = true;
  // A Parse is counted against the budget when it is executed.
  r.explain = GateRequest::Explain::kRunOrDefer;
  r.explain_args.param_types = m->param_types;
  return judge(f, std::move(r));
}

bool ClientSession::actParse(const protocol::Frame& f, GateVerdict v) {
  auto m = protocol::parseParse(f.body);
  if (!m) return false;  // checked when it arrived
  const std::string name(m->statement);
  std::shared_ptr<const StatementPlan> plan = std::move(v.plan);
  if (!v.explain_error.empty()) {
    failExtendedExplain(plan, std::move(v.explain_error));
    skipped_.statement(name, {plan, true});
    return true;
  }
  const auto& d = plan->decision;
  if (d.denied) {
    // The denial answers the Parse; the server never sees the text. As after any failed Parse,
    // the rest of the batch up to Sync is skipped.
    denyExtended(*plan);
    skipped_.statement(name, {plan, true});  // its record is the denial's
    if (name.empty()) statements_.erase(name);
    return true;
  }
  if (d.explain_sql && d.explain_needs_params) {
    // The plan depends on the parameters: the cost gate runs when the Bind brings them.
    statement_types_[name] = m->param_types;
  }
  if (!d.warnings.empty()) {
    std::string out;
    writeWarnings(out, *plan);
    queueLocal(std::move(out), false);
  }
  if (overrides_.any()) {
    statement_overrides_[name] = overrides_;
  } else if (!statement_overrides_.empty()) {
    statement_overrides_.erase(name);
  }
  Pending p(Expect::kParse);
  p.name = name;
  if (const auto existing = statements_.find(name); existing != statements_.end()) {
    p.had_previous = true;
    p.previous = existing->second;
  }
  statements_[name] = plan;
  pushPending(std::move(p));
  if (d.rewritten_sql) {
    ++daemon_.counters().rewrites;
    protocol::writeParse(server_->out(), m->statement, *d.rewritten_sql, m->param_types);
    unsynced_ = true;
  } else {
    forward(f);
  }
  return true;
}

bool ClientSession::handleBind(const protocol::Frame& f) {
  auto b = protocol::parseBind(f.body);
  if (!b) {
    protocolViolation("malformed Bind message: " + b.error());
    return false;
  }
  const std::string statement(b->statement);
  auto stmt = statements_.find(statement);
  GateVerdict v;
  v.plan = stmt == statements_.end() ? nullptr : stmt->second;
  if (const auto ov = statement_overrides_.find(statement); ov != statement_overrides_.end()) {
    v.overrides = ov->second;
  }
  if (v.plan && !v.plan->decision.denied && v.plan->decision.explain_sql && policy_ && server_) {
    // The cost gate's verdict with these parameters.
    GateRequest r;
    r.plan = std::move(v.plan);
    r.overrides = std::move(v.overrides);
    r.extended = true;
    r.explain = GateRequest::Explain::kRun;
    if (const auto types = statement_types_.find(statement); types != statement_types_.end()) {
      r.explain_args.param_types = types->second;
    }
    r.explain_args.param_formats = b->param_formats;
    r.explain_args.params.reserve(b->params.size());
    for (const auto& p : b->params) {
      r.explain_args.params.push_back(p ? std::optional<std::string>(std::string(*p)) : std::nullopt);
    }
    r.explain_args.bound = true;
    return judge(f, std::move(r));
  }
  return act(f, std::move(v));
}

bool ClientSession::actBind(const protocol::Frame& f, GateVerdict v) {
  auto b = protocol::parseBind(f.body);
  if (!b) return false;  // checked when it arrived
  const std::string portal(b->portal);
  std::shared_ptr<const StatementPlan> plan = std::move(v.plan);
  if (!v.explain_error.empty()) {
    failExtendedExplain(plan, std::move(v.explain_error));
    skipped_.portal(portal, {plan, true});
    return true;
  }
  if (plan && plan->decision.denied) {
    // Denied on its parameters: the denial answers the Bind, the batch is skipped up to Sync.
    denyExtended(*plan);
    skipped_.portal(portal, {plan, true});  // its record is the denial's
    return true;
  }
  auto it = portals_.find(portal);
  if (it != portals_.end()) {
    // Binding the unnamed portal again replaces it (a named one is an error the server reports).
    if (portal.empty()) {
      auto& run = it->second.run;
      if (run && !run->finished && !awaitingServer(pending_, run)) finishRun(*run, history::Outcome::kOk);
      it->second = Portal{plan, nullptr, overrides_, screenParams(plan.get(), *b)};
    }
  } else {
    if (portals_.size() >= static_cast<size_t>(config_->limits.max_prepared_statements)) {
      std::string out;
      protocol::writeError(out, "ERROR", "54000",
                           "too many open portals in this session (limit " +
                               std::to_string(config_->limits.max_prepared_statements) +
                               "); close the ones you no longer need");
      queueLocal(std::move(out), false);
      skipBatch("54000", false);
      return true;
    }
    portals_.emplace(portal, Portal{plan, nullptr, overrides_, screenParams(plan.get(), *b)});
  }
  Pending bind_entry(Expect::kBind);
  bind_entry.plan = plan;
  bind_entry.name = portal;
  pushPending(std::move(bind_entry));
  forward(f);
  return true;
}

bool ClientSession::handleExecute(const protocol::Frame& f) {
  auto e = protocol::parseExecute(f.body);
  if (!e) {
    protocolViolation("malformed Execute message: " + e.error());
    return false;
  }
  GateVerdict v;
  const auto it = portals_.find(std::string(e->portal));
  if (it != portals_.end() && (!it->second.run || it->second.run->finished)) {
    // A new execution: it counts against the budget now, once (a suspended portal's later
    // Executes continue the same run).
    v.plan = it->second.plan;
    v.overrides = it->second.overrides;  // the budget key and any denial belong to this statement
    if (v.plan && !v.plan->decision.denied) {
      GateRequest r;
      r.plan = std::move(v.plan);
      r.overrides = std::move(v.overrides);
      r.extended = true;
      r.admit = true;
      return judge(f, std::move(r));
    }
  }
  return act(f, std::move(v));
}

bool ClientSession::actExecute(const protocol::Frame& f, GateVerdict v) {
  auto e = protocol::parseExecute(f.body);
  if (!e) return false;  // checked when it arrived
  std::shared_ptr<StatementRun> run;
  auto it = portals_.find(std::string(e->portal));
  if (it != portals_.end()) {
    if (!it->second.run || it->second.run->finished) {
      if (v.plan && v.plan->decision.denied) {
        denyExtended(*v.plan);
        return true;
      }
      it->second.run = startRun(it->second.plan, 0, true);
      it->second.run->budget_key = std::move(v.budget_key);
      it->second.run->overrides = it->second.overrides;
      it->second.run->params = it->second.params;
    }
    run = it->second.run;
  } else {
    // A portal we never saw bound: the server will refuse it; the record says so.
    run = startRun(nullptr, 0, true);
  }
  Pending p(Expect::kExecute);
  p.run = std::move(run);
  pushPending(std::move(p));
  forward(f);
  return true;
}

bool ClientSession::handleClose(const protocol::Frame& f) {
  auto c = protocol::parseClose(f.body);
  if (!c) {
    protocolViolation("malformed Close message: " + c.error());
    return false;
  }
  const std::string name(c->name);
  if (c->kind == 'S') {
    statements_.erase(name);
    statement_types_.erase(name);
    statement_overrides_.erase(name);
  } else {
    auto it = portals_.find(name);
    if (it != portals_.end()) {
      auto& run = it->second.run;
      if (run && !run->finished && !awaitingServer(pending_, run)) finishRun(*run, history::Outcome::kOk);
      portals_.erase(it);
    }
  }
  pushPending(Pending(Expect::kClose));
  forward(f);
  return true;
}

void ClientSession::queueLocal(std::string bytes, bool with_rfq) {
  if (pending_.empty()) {
    client_.out().append(bytes);
    if (with_rfq) protocol::writeReadyForQuery(client_.out(), tx_status_);
    return;
  }
  Pending p(Expect::kLocal);
  p.local = std::move(bytes);
  p.local_rfq = with_rfq;
  pending_.push_back(std::move(p));
  // The answer waits behind the server's answers to earlier extended-protocol messages, which the
  // server holds until a Flush or Sync. PostgreSQL flushes as soon as it reports an error; do the
  // same, or a client that sends Flush after a denial (skipped, as everything up to Sync) waits
  // forever for the ParseComplete and the denial.
  if (unsynced_ && server_) protocol::writeFlush(server_->out());
}

void ClientSession::emitLocalHeads() {
  while (!pending_.empty() && pending_.front().kind == Expect::kLocal) {
    client_.out().append(pending_.front().local);
    if (pending_.front().local_rfq) protocol::writeReadyForQuery(client_.out(), tx_status_);
    pending_.pop_front();
  }
}

void ClientSession::popPending() {
  if (!pending_.empty()) pending_.pop_front();
  emitLocalHeads();
}

// ---------------------------------------------------------------------------------------------
// Statement runs and history
// ---------------------------------------------------------------------------------------------

void ClientSession::finishRun(StatementRun& run, history::Outcome outcome,
                              std::string_view sqlstate, std::string_view message) {
  if (run.finished) return;
  ++statement_count_;
  daemon_.statementRecorder().finish(run, requestContext(run.extended, run.overrides), policy_, outcome, sqlstate,
                            message);
}

void ClientSession::denyExtended(const StatementPlan& plan) {
  // The denial answers the extended-protocol message; like after any failed Parse or Bind, the
  // rest of the batch up to Sync is skipped.
  recordDenied(plan, true);
  std::string out;
  writeDeny(out, plan);
  queueLocal(std::move(out), false);
  skipBatch(plan.decision.deny.sqlstate.empty() ? std::string_view("42501") : std::string_view(plan.decision.deny.sqlstate),
            true);
}

void ClientSession::skipBatch(std::string_view sqlstate, bool denied) {
  deny_skipping_ = true;
  skipped_.begin(sqlstate,
                 denied ? "an earlier statement in the same batch was denied"
                        : "an earlier message in the same batch failed",
                 static_cast<size_t>(config_->limits.max_prepared_statements));
}

void ClientSession::recordSkipped(const std::shared_ptr<const StatementPlan>& plan, size_t index,
                                  bool extended) {
  auto run = startRun(plan, index, extended);
  finishRun(*run, history::Outcome::kError, skipped_.sqlstate(), skipped_.message());
}

void ClientSession::noteSkipped(const protocol::Frame& f) {
  switch (f.type) {
    case 'P': {
      auto m = protocol::parseParse(f.body);
      if (m) skipped_.statement(m->statement, {daemon_.policy().unjudgedPlan(m->sql), false});
      return;
    }
    case 'B': {
      auto b = protocol::parseBind(f.body);
      if (!b) return;
      auto target = skipped_.findStatement(b->statement);
      if (!target) {
        const auto it = statements_.find(std::string(b->statement));
        target = SkippedBatch::Target{it == statements_.end() ? nullptr : it->second, false};
      }
      skipped_.portal(b->portal, std::move(*target));
      return;
    }
    case 'E': {
      auto e = protocol::parseExecute(f.body);
      if (!e) return;
      auto found = skipped_.execute(e->portal);
      if (!found.found) {
        const auto it = portals_.find(std::string(e->portal));
        if (it != portals_.end()) found.target.plan = it->second.plan;
      }
      // A portal nobody bound would have failed on the server: nothing ran, nothing to record.
      if (found.target.plan && !found.target.recorded) recordSkipped(found.target.plan, 0, true);
      return;
    }
    case 'Q': {
      // The server ignores a Query in a skipped batch too; each of its statements is accounted for.
      auto body = f.body;
      if (!body.empty() && body.back() == '\0') body.remove_suffix(1);
      const auto plan = daemon_.policy().unjudgedPlan(body);
      for (size_t i = 0; i < plan->statements.size(); ++i) recordSkipped(plan, i, false);
      return;
    }
    default:
      return;
  }
}

void ClientSession::recordDenied(const StatementPlan& plan, bool extended) {
  statement_count_ += plan.statements.size();
  daemon_.statementRecorder().denied(plan, requestContext(extended, overrides_), policy_, overrides_);
}

void ClientSession::finishPortals() {
  for (auto& [name, p] : portals_) {
    if (p.run && !p.run->finished) finishRun(*p.run, history::Outcome::kOk);
  }
  portals_.clear();
}

void ClientSession::finishAllPending(history::Outcome outcome, std::string_view message,
                                     std::string_view sqlstate) {
  for (auto& p : pending_) {
    if (p.kind == Expect::kExecute && p.run && !p.run->finished) {
      finishRun(*p.run, outcome, sqlstate, message);
    } else if (p.kind == Expect::kQuery) {
      if (p.run && !p.run->finished) finishRun(*p.run, outcome, sqlstate, message);
      p.run.reset();
      while (p.plan && p.next_statement < p.plan->statements.size()) {
        auto run = startRun(p.plan, p.next_statement++, false);
        run->overrides = p.overrides;
        finishRun(*run, outcome, sqlstate, message);
      }
    }
  }
  pending_.clear();
  // Suspended portals belong to the statement the client was reading.
  for (auto& [name, p] : portals_) {
    if (p.run && !p.run->finished) finishRun(*p.run, outcome, sqlstate, message);
  }
  portals_.clear();
}

// ---------------------------------------------------------------------------------------------
// Proxying: server -> client
// ---------------------------------------------------------------------------------------------

void ClientSession::onServerMessage(ServerConnection&, const protocol::Frame& f) {
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  if (!handleServerMessage(f)) return;
  // A session shutting down ends once the statement it was running has finished.
  if (shutting_down_ && state_ == ClientState::kReady && pending_.empty()) {
    flushClient();
    terminate("57P01", "terminating connection: pgwarden is shutting down");
  }
}

void ClientSession::sendTruncationNotice(StatementRun& run) {
  if (run.notice_sent) return;
  run.notice_sent = true;
  if (run.plan && !run.plan->decision.truncation.message.empty()) {
    const auto& v = run.plan->decision.truncation;
    protocol::writeNotice(client_.out(), "WARNING",
                          v.sqlstate.empty() ? std::string_view("01000") : v.sqlstate, v.message,
                          v.detail, v.hint);
    return;
  }
  std::string text = run.plan ? run.plan->decision.truncation_notice : std::string();
  if (text.empty()) {
    text = "The result was truncated at " + std::to_string(run.max_rows) +
           " rows. Add a WHERE clause or an aggregate to narrow it.";
  }
  protocol::writeNotice(client_.out(), "WARNING", "01000", text);
}

const guards::Verdict* ClientSession::sendScreenNotices(StatementRun& run, const Pending& head) {
  if (!screenMaySpeak(run)) return nullptr;
  const auto stats = daemon_.tableStats(server_database_);
  const auto& found = screenRun(run, policy_, stats.get());
  if (found.empty()) return nullptr;
  // A denial replaces CommandComplete only where the client expects nothing after it but
  // ReadyForQuery; elsewhere it is sent as a warning.
  const bool last = head.kind == Expect::kQuery && head.plan &&
                    head.next_statement >= head.plan->statements.size();
  const guards::Verdict* denial = last ? screenDenial(run) : nullptr;
  for (const auto& v : found) {
    if (&v == denial) continue;
    protocol::writeNotice(client_.out(), "WARNING", guards::codes::kSqlstateWarning, v.message, v.detail, v.hint);
    ++daemon_.counters().warnings_sent;
  }
  return denial;
}

void ClientSession::handleServerCommandComplete(const protocol::Frame& f, Pending& head) {
  StatementRun* run = head.run.get();
  auto cc = protocol::parseCommandComplete(f.body);
  const std::string_view tag = cc ? cc->tag : std::string_view();
  if (run && run->truncated) sendTruncationNotice(*run);
  const guards::Verdict* denial = run ? sendScreenNotices(*run, head) : nullptr;
  if (denial) {
    writeDeny(client_.out(), *denial);
    finishRun(*run, history::Outcome::kError, denial->sqlstate, denial->message);
    return;
  }
  if (run && run->truncated) {
    protocol::writeCommandComplete(client_.out(), retag(tag, head.rows_this_execute));
  } else {
    client_.out().append(f.raw.data(), f.raw.size());
  }
  if (run) {
    if (tag.rfind("SELECT", 0) != 0 && tag.rfind("FETCH", 0) != 0) {
      run->rows_affected = protocol::commandTagCount(tag);
    }
    if (tag.rfind("COPY", 0) == 0) run->rows_sent = protocol::commandTagCount(tag);
    run->bytes_sent += static_cast<int64_t>(f.raw.size());
    finishRun(*run, history::Outcome::kOk);
  }
}

bool ClientSession::handleServerMessage(const protocol::Frame& f) {
  std::string& out = client_.out();
  // Messages that may come at any time.
  switch (f.type) {
    case 'N':
      if (!pending_.empty() && pending_.front().kind == Expect::kInternal) return true;
      out.append(f.raw.data(), f.raw.size());
      return true;
    case 'A':
      out.append(f.raw.data(), f.raw.size());
      return true;
    case 'S':
      // Recorded (and checked) by the server connection; the client sees it as it is, except
      // while attaching, when finishAttach sends the full set.
      if (state_ == ClientState::kReady) out.append(f.raw.data(), f.raw.size());
      return true;
    default:
      break;
  }
  emitLocalHeads();
  if (pending_.empty()) {
    if (f.type == 'E') {
      // A FATAL the server sends before it goes (administrator command, idle timeout).
      out.append(f.raw.data(), f.raw.size());
      return true;
    }
    spdlog::error("{}: unexpected message '{}' from the server with nothing outstanding",
                  logPrefix(), logsafe(f.type));
    terminate("08P01", "protocol error between pgwarden and the database; reconnect");
    return false;
  }
  Pending& head = pending_.front();

  if (f.type == 'E') {
    auto e = protocol::parseErrorFields(f.body);
    const std::string sqlstate = e ? std::string(e->sqlstate()) : std::string();
    const std::string message = e ? std::string(e->message()) : std::string();
    const int cls = sqlstateClass(sqlstate.data(), sqlstate.size());
    if (cls >= 0) ++daemon_.counters().server_errors_by_class[static_cast<size_t>(cls)];
    switch (head.kind) {
      case Expect::kInternal:
        attach_failed_ = true;
        attach_error_ = message;
        if (!sqlstate.empty()) attach_error_ = sqlstate + "\x1f" + message;
        return true;
      case Expect::kQuery:
        if (head.run && !head.run->finished) {
          head.run->bytes_sent += static_cast<int64_t>(f.raw.size());
          finishRun(*head.run, outcomeForError(sqlstate), sqlstate, message);
        }
        head.run.reset();
        // The statements after a failed one in the same Query never run.
        while (head.plan && head.next_statement < head.plan->statements.size()) {
          auto run = startRun(head.plan, head.next_statement++, false);
          run->overrides = head.overrides;
          finishRun(*run, history::Outcome::kError, sqlstate,
                    "not executed: an earlier statement in the same query failed");
        }
        out.append(f.raw.data(), f.raw.size());
        return true;
      case Expect::kSync:
        out.append(f.raw.data(), f.raw.size());
        return true;
      case Expect::kExplain:
        return handleExplainMessage(f, head);
      case Expect::kParse:
      case Expect::kBind:
      case Expect::kDescribeStatement:
      case Expect::kDescribePortal:
      case Expect::kExecute:
      case Expect::kClose:
      case Expect::kLocal:
        out.append(f.raw.data(), f.raw.size());
        afterServerError(sqlstate, message);
        // Report the failed statement with the server's words.
        return true;
    }
  }

  switch (head.kind) {
    case Expect::kInternal:
      if (f.type == 'Z') {
        auto z = protocol::parseReadyForQuery(f.body);
        if (z) {
          tx_status_ = z->status;
          server_->setTxStatus(z->status);
        }
        pending_.pop_front();
        if (attach_failed_) {
          // A client parameter the server rejected (a bad TimeZone...): PostgreSQL refuses the
          // connection in that case; so do we, with the server's reason.
          std::string sqlstate = "22023";
          std::string message = attach_error_;
          const auto sep = attach_error_.find('\x1f');
          if (sep != std::string::npos) {
            sqlstate = attach_error_.substr(0, sep);
            message = attach_error_.substr(sep + 1);
          }
          fatal(sqlstate, message, RejectReason::kNotAllowed);
          return false;
        }
        finishAttach();
        return state_ == ClientState::kReady;
      }
      return true;  // CommandComplete of the SETs
    case Expect::kLocal:
      return true;  // emitted above; cannot be the head here
    case Expect::kExplain:
      return handleExplainMessage(f, head);
    case Expect::kParse:
      if (f.type == '1') {
        out.append(f.raw.data(), f.raw.size());
        popPending();
        return true;
      }
      break;
    case Expect::kBind:
      if (f.type == '2') {
        out.append(f.raw.data(), f.raw.size());
        popPending();
        return true;
      }
      break;
    case Expect::kClose:
      if (f.type == '3') {
        out.append(f.raw.data(), f.raw.size());
        popPending();
        return true;
      }
      break;
    case Expect::kDescribeStatement:
      if (f.type == 't' && !head.described) {
        head.described = true;
        out.append(f.raw.data(), f.raw.size());
        return true;
      }
      if (f.type == 'T' || f.type == 'n') {
        out.append(f.raw.data(), f.raw.size());
        popPending();
        return true;
      }
      break;
    case Expect::kDescribePortal:
      if (f.type == 'T' || f.type == 'n') {
        out.append(f.raw.data(), f.raw.size());
        popPending();
        return true;
      }
      break;
    case Expect::kSync:
      if (f.type == 'Z') break;  // handled below
      break;
    case Expect::kExecute:
    case Expect::kQuery:
      switch (f.type) {
        case 'T':
          if (head.kind == Expect::kQuery) {
            head.rows_this_execute = 0;
            if (head.run) head.run->bytes_sent += static_cast<int64_t>(f.raw.size());
            out.append(f.raw.data(), f.raw.size());
            return true;
          }
          break;
        case 'D': {
          StatementRun* run = head.run.get();
          if (run && run->max_rows >= 0 && run->rows_sent >= run->max_rows) {
            run->truncated = true;  // held back: the client gets max_rows rows
            return true;
          }
          out.append(f.raw.data(), f.raw.size());
          ++head.rows_this_execute;
          ++daemon_.counters().rows_returned;
          if (run) {
            ++run->rows_sent;
            run->bytes_sent += static_cast<int64_t>(f.raw.size());
            if (run->rows_sent == 1) {
              auto cells = protocol::parseDataRowValues(f.body);
              run->single_zero = cells && cells->size() == 1 && (*cells)[0] &&
                                 isZeroCell(*(*cells)[0]);
            }
          }
          return true;
        }
        case 'C':
          handleServerCommandComplete(f, head);
          if (head.kind == Expect::kQuery) {
            head.rows_this_execute = 0;
            head.run.reset();
            if (head.plan && head.next_statement < head.plan->statements.size()) {
              head.run = startRun(head.plan, head.next_statement++, false);
              head.run->overrides = head.overrides;
            }
            return true;
          }
          popPending();
          return true;
        case 'I':
          out.append(f.raw.data(), f.raw.size());
          if (head.run && !head.run->finished) finishRun(*head.run, history::Outcome::kOk);
          if (head.kind == Expect::kQuery) {
            head.run.reset();
            return true;
          }
          popPending();
          return true;
        case 's':
          if (head.kind == Expect::kExecute) {
            StatementRun* run = head.run.get();
            if (run && run->truncated) {
              // The cap is reached: end the portal for the client here.
              sendTruncationNotice(*run);
              sendScreenNotices(*run, head);
              protocol::writeCommandComplete(out, "SELECT " + std::to_string(head.rows_this_execute));
              finishRun(*run, history::Outcome::kOk);
            } else {
              out.append(f.raw.data(), f.raw.size());
              // Its portal was replaced or closed while this Execute was in flight: nothing
              // else holds the run to finish it later.
              if (run && !run->finished && head.run.use_count() == 1) {
                finishRun(*run, history::Outcome::kOk);
              }
            }
            popPending();
            return true;
          }
          break;
        case 'H':  // CopyOutResponse: COPY ... TO STDOUT streams through
        case 'd':
        case 'c':
          if (head.run) head.run->bytes_sent += static_cast<int64_t>(f.raw.size());
          out.append(f.raw.data(), f.raw.size());
          return true;
        case 'G':
          // COPY FROM STDIN writes; the read-only session refuses it too, this is the clean way
          // out if the server ever gets that far. The server answers with an ErrorResponse.
          protocol::writeCopyFail(server_->out(),
                                  "COPY FROM STDIN is not allowed through pgwarden");
          flushServer();
          return true;
        case 'W':
          terminate("08P01", "COPY BOTH (replication) is not supported through pgwarden");
          return false;
        case 'Z':
          break;
        default:
          break;
      }
      break;
  }

  if (f.type == 'Z' && (head.kind == Expect::kSync || head.kind == Expect::kQuery)) {
    auto z = protocol::parseReadyForQuery(f.body);
    if (!z) {
      terminate("08P01", "protocol error between pgwarden and the database; reconnect");
      return false;
    }
    tx_status_ = z->status;
    if (server_) server_->setTxStatus(z->status);
    if (head.kind == Expect::kQuery) {
      if (head.run && !head.run->finished) finishRun(*head.run, history::Outcome::kOk);
    }
    // Portals end with their transaction.
    if (z->status != 'T') finishPortals();
    out.append(f.raw.data(), f.raw.size());
    popPending();
    return true;
  }

  spdlog::error("{}: out-of-order message '{}' from the server (expected a response to entry {})",
                logPrefix(), logsafe(f.type), static_cast<int>(head.kind));
  terminate("08P01", "protocol error between pgwarden and the database; reconnect");
  return false;
}

void ClientSession::afterServerError(const std::string& sqlstate, const std::string& message) {
  // After an error in an extended-protocol message the server skips everything up to Sync:
  // drop what we expected for those messages, undoing their bookkeeping. The statement the
  // error belongs to gets one record with the server's SQLSTATE (its Execute's, or, when the
  // Parse or Bind failed, one of its own); later Executes in the batch were never run.
  std::shared_ptr<const StatementPlan> failed_plan;
  guards::AgentOverrides failed_overrides;
  bool failed_recorded = false;
  bool first = true;
  // The failed Parse's statement name or Bind's portal: the client's later messages up to Sync
  // that name it refer to a statement whose record is this failure's.
  std::optional<std::string> failed_statement;
  std::optional<std::string> failed_portal;
  const auto skipRest = [&] {
    if (!pending_.empty()) return;
    server_skipping_ = true;
    skipped_.begin(sqlstate, "an earlier message in the same batch failed",
                   static_cast<size_t>(config_->limits.max_prepared_statements));
    if (failed_statement) skipped_.statement(*failed_statement, {failed_plan, true});
    if (failed_portal) skipped_.portal(*failed_portal, {failed_plan, true});
  };
  const auto recordFailure = [&] {
    if (failed_plan && !failed_recorded) {
      failed_recorded = true;
      auto run = startRun(failed_plan, 0, true);
      run->overrides = failed_overrides;
      finishRun(*run, outcomeForError(sqlstate), sqlstate, message);
    }
  };
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    if (p.kind == Expect::kSync) break;
    if (p.kind == Expect::kQuery) {
      // A simple Query sent inside the unfinished batch: the server skips it too (it ignores
      // every message up to Sync) and owes it no ReadyForQuery. Each of its statements gets
      // its record.
      if (p.run && !p.run->finished) {
        finishRun(*p.run, history::Outcome::kError, sqlstate,
                  "not executed: an earlier message in the same batch failed");
      }
      while (p.plan && p.next_statement < p.plan->statements.size()) {
        auto run = startRun(p.plan, p.next_statement++, false);
        run->overrides = p.overrides;
        finishRun(*run, history::Outcome::kError, sqlstate,
                  "not executed: an earlier message in the same batch failed");
      }
      first = false;
      pending_.pop_front();
      continue;
    }
    if (first) {
      if (p.kind == Expect::kParse) {
        failed_statement = p.name;
        auto it = statements_.find(p.name);
        if (it != statements_.end()) failed_plan = it->second;
        if (auto ov = statement_overrides_.find(p.name); ov != statement_overrides_.end()) {
          failed_overrides = ov->second;
        }
      } else if (p.kind == Expect::kBind) {
        failed_plan = p.plan;
        failed_portal = p.name;
      } else if (p.kind == Expect::kExecute && p.run && !p.run->finished) {
        finishRun(*p.run, outcomeForError(sqlstate), sqlstate, message);
        failed_recorded = true;
      }
    } else if (p.kind == Expect::kExecute && p.run && !p.run->finished) {
      if (failed_plan && !failed_recorded && p.run->plan == failed_plan) {
        failed_recorded = true;
        finishRun(*p.run, outcomeForError(sqlstate), sqlstate, message);
      } else {
        finishRun(*p.run, history::Outcome::kError, sqlstate,
                  "not executed: an earlier message in the same batch failed");
      }
    }
    first = false;
    if (p.kind == Expect::kParse) {
      if (p.had_previous) {
        statements_[p.name] = p.previous;
      } else {
        statements_.erase(p.name);
      }
    }
    const bool explain = p.kind == Expect::kExplain;
    pending_.pop_front();
    if (explain && gate_->waiting()) {
      recordFailure();
      // The server skips our EXPLAIN with the rest of the batch; the paused message goes the
      // same way (everything up to Sync is ignored).
      cancelWaits();
      skipRest();
      resumeInput();
      return;
    }
  }
  recordFailure();
  skipRest();
}

void ClientSession::onServerChunk(ServerConnection&, char type, std::string_view bytes, bool first,
                                  bool last) {
  if (state_ != ClientState::kReady) return;
  if (first) {
    chunk_forward_ = true;
    chunk_run_.reset();
    emitLocalHeads();
    if (type == 'D' && !pending_.empty() &&
        (pending_.front().kind == Expect::kExecute || pending_.front().kind == Expect::kQuery)) {
      Pending& head = pending_.front();
      chunk_run_ = head.run;
      if (head.run && head.run->max_rows >= 0 && head.run->rows_sent >= head.run->max_rows) {
        head.run->truncated = true;
        chunk_forward_ = false;
      } else {
        ++head.rows_this_execute;
        ++daemon_.counters().rows_returned;
        if (head.run) ++head.run->rows_sent;
      }
    }
  }
  if (chunk_forward_) {
    client_.out().append(bytes.data(), bytes.size());
    if (chunk_run_) chunk_run_->bytes_sent += static_cast<int64_t>(bytes.size());
    flushClient();
    updateBackpressure();
  }
  if (last) chunk_run_.reset();
}

void ClientSession::onServerReadDone(ServerConnection&) {
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  flushClient();
  updateBackpressure();
}

void ClientSession::onServerWritten(ServerConnection&) {
  if (client_paused_) updateBackpressure();
}

void ClientSession::onStreamWritten(Stream&, int status) {
  if (status != 0) {
    closeSession("write to the client failed");
    return;
  }
  if (server_paused_) updateBackpressure();
}

void ClientSession::onServerLost(ServerConnection& s, const std::string& why) {
  server_ = nullptr;
  server_paused_ = false;
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  // The statement did not fail on the server: pgwarden lost the connection it ran on.
  if (s.readOnlyLost()) {
    finishAllPending(history::Outcome::kAborted,
                     "pgwarden ended the session: the server's read-only setting was turned off",
                     "25006");
    spdlog::warn("{}: ending the session: {}", logPrefix(), logsafe(why, kLogMessageMaxBytes));
    fatal("25006",
          "terminating connection: the server reported default_transaction_read_only=off, and "
          "pgwarden only runs read-only sessions; reconnect and leave that setting alone",
          RejectReason::kNotAllowed);
    return;
  }
  finishAllPending(history::Outcome::kAborted,
                   "the server connection was lost before the statement finished", "08006");
  spdlog::warn("{}: server connection lost: {}", logPrefix(), logsafe(why, kLogMessageMaxBytes));
  fatal("08006",
        "the connection to the database was lost; reconnect and try again",
        RejectReason::kUnreachable);
}

// ---------------------------------------------------------------------------------------------
// Ending
// ---------------------------------------------------------------------------------------------

int ClientSession::rfqOwed() const {
  int n = 0;
  for (const auto& p : pending_) {
    n += (p.kind == Expect::kSync || p.kind == Expect::kQuery || p.kind == Expect::kInternal ||
          (p.kind == Expect::kExplain && p.explain_simple))
             ? 1
             : 0;
  }
  return n;
}

bool ClientSession::owedIsUncertain() const {
  bool batch_open = server_skipping_;
  for (const auto& p : pending_) {
    switch (p.kind) {
      case Expect::kSync:
        batch_open = false;
        break;
      case Expect::kParse:
      case Expect::kBind:
      case Expect::kDescribeStatement:
      case Expect::kDescribePortal:
      case Expect::kExecute:
      case Expect::kClose:
        batch_open = true;
        break;
      case Expect::kExplain:
        if (!p.explain_simple) {
          batch_open = true;
          break;
        }
        [[fallthrough]];
      case Expect::kQuery:
      case Expect::kInternal:
        if (batch_open) return true;
        break;
      case Expect::kLocal:
        break;
    }
  }
  return false;
}

bool ClientSession::unsyncedTail() const {
  if (server_skipping_) return true;
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    switch (it->kind) {
      case Expect::kSync:
      case Expect::kQuery:
      case Expect::kInternal:
        return false;
      case Expect::kExplain:
        if (it->explain_simple) return false;
        return true;
      case Expect::kParse:
      case Expect::kBind:
      case Expect::kDescribeStatement:
      case Expect::kDescribePortal:
      case Expect::kExecute:
      case Expect::kClose:
        return true;
      case Expect::kLocal:
        break;
    }
  }
  // Extended messages whose responses all came (after a Flush) still leave the server waiting
  // for a Sync.
  return unsynced_;
}

void ClientSession::releaseServer(bool client_gone) {
  ServerConnection* s = server_;
  if (!s) return;
  server_ = nullptr;
  if (server_paused_) {
    server_paused_ = false;
    s->resumeReading();
  }
  // A Query behind unfinished extended-protocol messages is answered only if none of them fails
  // (after an error the server skips everything up to the Sync): how many ReadyForQuery are
  // still owed is then unknown, and a drain that waits for one too many would hold the
  // connection until its deadline. Such a connection is closed instead.
  const int owed = owedIsUncertain() ? -1 : rfqOwed();
  const bool need_sync = unsyncedTail();
  bool running = false;
  for (const auto& p : pending_) {
    running = running || p.kind == Expect::kExecute || p.kind == Expect::kQuery ||
              p.kind == Expect::kExplain;
  }
  if (running) {
    // The client will never read this result: stop the server working on it.
    daemon_.cancelServerQuery(s->backendPid(), s->backendKey());
  }
  if (!pending_.empty() || !portals_.empty()) {
    if (client_gone && !ended_message_.empty()) {
      // pgwarden ended the session (fatal()), the client did not leave: the record keeps the
      // FATAL the client was sent, which says why.
      finishAllPending(history::Outcome::kAborted, ended_message_, ended_sqlstate_);
    } else {
      finishAllPending(client_gone ? history::Outcome::kClientGone : history::Outcome::kOk,
                       client_gone ? "the client disconnected before the statement finished" : "");
    }
  }
  s->release(owed, need_sync);
}

void ClientSession::closeSession(const std::string& reason) {
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  cancelWaits();
  close_reason_ = reason;
  const ClientState before = state_;
  if (waiting_pool_) {
    waiting_pool_->cancelWait(this);
    waiting_pool_ = nullptr;
  }
  const bool mid_statement = !pending_.empty();
  if (server_) releaseServer(mid_statement);
  finishPortals();
  if (key_registered_) {
    daemon_.unregisterCancelKey(key_pid_, key_secret_);
    key_registered_ = false;
  }
  auto& c = daemon_.counters();
  if (before == ClientState::kReady && c.clients_ready > 0) --c.clients_ready;
  if (before != ClientState::kStartup || !user_.empty()) {
    const uint64_t ms = daemon_.nowMs() - connected_ms_;
    spdlog::info("{}: disconnected after {}.{:03}s, {} statement{}: {}", logPrefix(), ms / 1000,
                 ms % 1000, statement_count_, statement_count_ == 1 ? "" : "s",
                 logsafe(reason, kLogMessageMaxBytes));
  } else {
    spdlog::debug("{}: closed before startup: {}", logPrefix(),
                  logsafe(reason, kLogMessageMaxBytes));
  }
  setState(ClientState::kClosing);
  deadline_ms_ = daemon_.nowMs() + kCloseFlushMs;
  client_.closeWhenFlushed();
}

void ClientSession::fatal(const std::string& sqlstate, const std::string& message,
                          RejectReason reason) {
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  if (state_ != ClientState::kReady) daemon_.counters().reject(reason);
  protocol::writeError(client_.out(), "FATAL", sqlstate, message);
  ended_sqlstate_ = sqlstate;
  ended_message_ = message;
  closeSession(message);
}

void ClientSession::terminate(const std::string& sqlstate, const std::string& message) {
  fatal(sqlstate, message, RejectReason::kShutdown);
}

void ClientSession::protocolViolation(const std::string& message) {
  ++daemon_.counters().protocol_errors;
  spdlog::warn("{}: protocol violation: {}", logPrefix(), logsafe(message, kLogMessageMaxBytes));
  fatal("08P01", message, RejectReason::kBadProtocol);
}

void ClientSession::onStreamEnd(Stream&, int status) {
  if (status == UV_EPROTO && !client_.tlsError().empty()) {
    // Certificate and protocol problems are the operator's to fix: say so above debug level.
    spdlog::warn("{}: TLS: {}", logPrefix(), logsafe(client_.tlsError()));
    closeSession("TLS: " + client_.tlsError());
    return;
  }
  closeSession(status == UV_EOF ? "client closed the connection"
                                : std::string("client read error: ") + uv_strerror(status));
}

void ClientSession::onStreamClosed(Stream&) {
  setState(ClientState::kClosed);
  auto& c = daemon_.counters();
  if (c.clients_current > 0) --c.clients_current;
  daemon_.onSessionClosed(this);
}

void ClientSession::cancelFromClient() {
  if (server_ && !pending_.empty()) {
    daemon_.cancelServerQuery(server_->backendPid(), server_->backendKey());
  }
}

void ClientSession::beginShutdown() {
  shutting_down_ = true;
  if (state_ == ClientState::kClosing || state_ == ClientState::kClosed) return;
  if (state_ != ClientState::kReady || pending_.empty()) {
    terminate("57P01", "terminating connection: pgwarden is shutting down");
    return;
  }
  // Busy: let the current statement finish, read nothing new.
  client_.stopRead();
  client_paused_ = true;
}

void ClientSession::tick(uint64_t now_ms) {
  switch (state_) {
    case ClientState::kStartup:
    case ClientState::kAuth:
      if (now_ms >= deadline_ms_ && startup_reject_) {
        const StartupReject r = *startup_reject_;
        fatal(r.sqlstate, r.message, r.reason);
      } else if (now_ms >= deadline_ms_) {
        spdlog::info("{}: startup timeout", logPrefix());
        fatal("57014", "canceling authentication due to timeout", RejectReason::kStartupTimeout);
      }
      break;
    case ClientState::kReady:
      if (config_->limits.client_idle_timeout.count() > 0 && pending_.empty() &&
          tx_status_ == 'I' &&
          now_ms - last_active_ms_ >= static_cast<uint64_t>(config_->limits.client_idle_timeout.count())) {
        terminate("57P05", "terminating connection due to idle-session timeout");
      }
      break;
    case ClientState::kClosing:
      if (now_ms >= deadline_ms_) client_.close();
      break;
    case ClientState::kAttaching:
      if (stats_wait_until_ms_ != 0 && now_ms >= stats_wait_until_ms_) {
        spdlog::info("{}: catalog statistics still loading; going on without them", logPrefix());
        stats_wait_until_ms_ = 0;
        finishAttach();
      }
      break;
    case ClientState::kAcquiring:
    case ClientState::kClosed:
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Agent context, webhook pauses and budgets
// ---------------------------------------------------------------------------------------------

guards::RequestContext ClientSession::requestContext(bool extended, const guards::AgentOverrides& ov) const {
  guards::RequestContext ctx;
  ctx.user = user_;
  ctx.database = database_;
  ctx.group = group_;
  // A sqlcommenter comment on the statement wins over SET and the startup values, for it alone.
  ctx.agent_id = ov.agent_id ? std::string_view(*ov.agent_id) : std::string_view(agent_id_);
  ctx.conversation_id = ov.conversation_id ? std::string_view(*ov.conversation_id) : std::string_view(conversation_id_);
  ctx.query_intent = ov.query_intent ? std::string_view(*ov.query_intent) : std::string_view(query_intent_);
  ctx.application_name = application_name_;
  ctx.client_addr = peer_host_;
  ctx.extended = extended;
  ctx.session_id = id_;
  ctx.budgets = daemon_.budgets();
  ctx.observer = &daemon_.metrics();
  return ctx;
}

bool ClientSession::answerAgentCommand(const guards::AgentCommand& cmd) {
  if (cmd.kind == guards::AgentCommand::Kind::kNone) return true;
  std::string out;
  applyAgentCommand(cmd, true, 0, out);
  queueLocal(std::move(out), true);
  return true;
}

void ClientSession::applyAgentCommand(const guards::AgentCommand& cmd, bool describe, int16_t format,
                                      std::string& out) {
  using Kind = guards::AgentCommand::Kind;
  if (!agent_defaults_) agent_defaults_ = std::array<std::string, 3>{agent_id_, conversation_id_, query_intent_};
  const size_t idx = cmd.key == guards::AgentKey::kAgentId ? 0 : cmd.key == guards::AgentKey::kConversationId ? 1 : 2;
  std::string* target = idx == 0 ? &agent_id_ : idx == 1 ? &conversation_id_ : &query_intent_;
  const std::string name = std::string("pgwarden.") + guards::agentKeyName(cmd.key);
  const int64_t started_us = wallClockMicros();
  switch (cmd.kind) {
    case Kind::kSet:
      *target = cmd.value;
      spdlog::info("{}: {} set by the client", logPrefix(), name);
      protocol::writeCommandComplete(out, "SET");
      break;
    case Kind::kReset:
      *target = (*agent_defaults_)[idx];
      protocol::writeCommandComplete(out, "RESET");
      break;
    case Kind::kShow:
      if (describe) writeTextColumn(out, name, format);
      // A text value's binary form is its bytes, so either format code gets the same cells.
      protocol::writeDataRow(out, {std::optional<std::string_view>(*target)});
      protocol::writeCommandComplete(out, "SHOW");
      break;
    case Kind::kError:
      protocol::writeError(out, "ERROR", cmd.sqlstate, cmd.error);
      break;
    case Kind::kNone:
      return;
  }
  const bool failed = cmd.kind == Kind::kError;
  recordAgentCommand(cmd, !describe, started_us, failed ? cmd.sqlstate : "",
                     failed ? cmd.error : "");
}

void ClientSession::recordAgentCommand(const guards::AgentCommand& cmd, bool extended,
                                       int64_t started_us, std::string_view sqlstate,
                                       std::string_view message) {
  using Kind = guards::AgentCommand::Kind;
  StatementRun run;
  run.plan = daemon_.policy().localPlan(
      cmd.text, cmd.kind == Kind::kShow ? "show" : cmd.kind == Kind::kReset ? "reset" : "set");
  run.extended = extended;
  run.started_us = started_us;
  if (cmd.kind == Kind::kShow) run.rows_sent = 1;
  finishRun(run, sqlstate.empty() ? history::Outcome::kOk : history::Outcome::kError, sqlstate,
            message);
}

bool ClientSession::handleAgentParse(const protocol::ParseMsg& m, const guards::AgentCommand& cmd) {
  const std::string name(m.statement);
  std::string out;
  std::string sqlstate, error;
  if (cmd.kind == guards::AgentCommand::Kind::kError) {
    sqlstate = cmd.sqlstate;
    error = cmd.error;
  } else if (!name.empty() && (statements_.count(name) || agent_statements_.count(name))) {
    sqlstate = "42P05";
    error = "prepared statement \"" + name + "\" already exists";
  } else if (!name.empty() &&
             agent_statements_.size() >= static_cast<size_t>(config_->limits.max_prepared_statements)) {
    sqlstate = "54000";
    error = "too many prepared statements in this session; close the ones you no longer need";
  }
  if (!sqlstate.empty()) {
    // A Parse that fails is a statement with its error, as when the server refuses one.
    protocol::writeError(out, "ERROR", sqlstate, error);
    recordAgentCommand(cmd, true, wallClockMicros(), sqlstate, error);
    // As after any failed Parse, the rest of the batch up to Sync is skipped.
    queueLocal(std::move(out), false);
    skipBatch(sqlstate, false);
    return true;
  }
  if (name.empty()) {
    // The unnamed statement is ours now; Bind "" must not find the server's old one here.
    statements_.erase(name);
    statement_types_.erase(name);
    statement_overrides_.erase(name);
  }
  agent_statements_[name] = cmd;
  protocol::writeParseComplete(out);
  queueLocal(std::move(out), false);
  return true;
}

bool ClientSession::handleAgentMessage(const protocol::Frame& f) {
  std::string out;
  switch (f.type) {
    case 'B': {
      auto b = protocol::parseBind(f.body);
      if (!b) return false;  // the usual path reports the malformed message
      const std::string portal(b->portal);
      const auto st = agent_statements_.find(std::string(b->statement));
      if (st == agent_statements_.end()) {
        agent_portals_.erase(portal);  // a server statement bound to this name replaces ours
        return false;
      }
      const int16_t format = b->result_formats.empty() ? 0 : b->result_formats[0];
      std::string_view code;
      if (!portal.empty() && (portals_.count(portal) || agent_portals_.count(portal))) {
        code = "42P03";
        protocol::writeError(out, "ERROR", code, "portal \"" + portal + "\" already exists");
      } else if (format != 0 && format != 1) {
        code = "22023";
        protocol::writeError(out, "ERROR", code, "unsupported format code: " + std::to_string(format));
      } else if (agent_portals_.size() >= static_cast<size_t>(config_->limits.max_prepared_statements)) {
        code = "54000";
        protocol::writeError(out, "ERROR", code, "too many open portals in this session; close the ones you no longer need");
      }
      if (!code.empty()) {
        queueLocal(std::move(out), false);
        skipBatch(code, false);
        return true;
      }
      if (const auto old = portals_.find(portal); old != portals_.end()) {
        // Binding the unnamed portal again replaces the server's one.
        auto& run = old->second.run;
        if (run && !run->finished && !awaitingServer(pending_, run)) finishRun(*run, history::Outcome::kOk);
        portals_.erase(old);
      }
      agent_portals_[portal] = AgentPortal{st->second, format};
      protocol::writeBindComplete(out);
      break;
    }
    case 'D': {
      auto d = protocol::parseDescribe(f.body);
      if (!d) return false;
      const std::string name(d->name);
      const guards::AgentCommand* cmd = nullptr;
      int16_t format = 0;
      if (d->kind == 'S') {
        const auto it = agent_statements_.find(name);
        if (it == agent_statements_.end()) return false;
        cmd = &it->second;
        protocol::writeParameterDescription(out, {});
      } else {
        const auto it = agent_portals_.find(name);
        if (it == agent_portals_.end()) return false;
        cmd = &it->second.cmd;
        format = it->second.format;
      }
      if (cmd->kind == guards::AgentCommand::Kind::kShow) {
        writeTextColumn(out, std::string("pgwarden.") + guards::agentKeyName(cmd->key), format);
      } else {
        protocol::writeNoData(out);
      }
      break;
    }
    case 'E': {
      auto e = protocol::parseExecute(f.body);
      if (!e) return false;
      const auto it = agent_portals_.find(std::string(e->portal));
      if (it == agent_portals_.end()) return false;
      applyAgentCommand(it->second.cmd, false, it->second.format, out);
      break;
    }
    case 'C': {
      auto c = protocol::parseClose(f.body);
      if (!c) return false;
      const std::string name(c->name);
      if (c->kind == 'S' ? agent_statements_.erase(name) == 0 : agent_portals_.erase(name) == 0) return false;
      protocol::writeCloseComplete(out);
      break;
    }
    default:
      return false;
  }
  queueLocal(std::move(out), false);
  return true;
}

// ---------------------------------------------------------------------------------------------
// The statement gate: judging a Query, Parse, Bind or Execute, and acting on its verdict
// ---------------------------------------------------------------------------------------------

bool ClientSession::judge(const protocol::Frame& f, GateRequest request) {
  GateVerdict v;
  if (!gate_->decide(std::move(request), v)) {
    // Waiting for a webhook, the cost gate's EXPLAIN or the budget store: the message is kept
    // (and nothing after it is read) until the verdict comes; then it goes on from here.
    paused_.assign(f.raw.data(), f.raw.size());
    return true;
  }
  return act(f, std::move(v));
}

bool ClientSession::act(const protocol::Frame& f, GateVerdict v) {
  overrides_ = v.overrides;
  switch (f.type) {
    case 'Q': return actQuery(f, std::move(v));
    case 'P': return actParse(f, std::move(v));
    case 'B': return actBind(f, std::move(v));
    case 'E': return actExecute(f, std::move(v));
    default: break;
  }
  gate_->discard(v);
  return true;
}

void ClientSession::onGateVerdict(GateVerdict v) {
  std::string raw = std::move(paused_);
  paused_.clear();
  if (state_ != ClientState::kReady || raw.size() < 5) {
    gate_->discard(v);
    return;
  }
  const protocol::Frame f{raw[0], raw, std::string_view(raw).substr(5)};
  if (deny_skipping_ || server_skipping_) {
    // An earlier message of the batch failed meanwhile: this one is skipped with the rest, up
    // to Sync, as the server skips them.
    gate_->discard(v);
    handleClientMessage(f);
  } else {
    act(f, std::move(v));
  }
  resumeInput();
}

void ClientSession::resumeInput() {
  if (state_ != ClientState::kReady) return;
  if (!client_paused_ && !client_.reading() && client_.startRead() != 0) {
    closeSession("cannot read from the client");
    return;
  }
  processInput();
}

void ClientSession::cancelWaits() {
  if (gate_) gate_->cancel();
  paused_.clear();
}

void ClientSession::recordExplainFailure(const std::shared_ptr<const StatementPlan>& plan, bool extended,
                                         const std::string& error_response) {
  std::string sqlstate;
  std::string message;
  if (error_response.size() > 5) {
    auto e = protocol::parseErrorFields(std::string_view(error_response).substr(5));
    if (e) {
      sqlstate = std::string(e->sqlstate());
      message = std::string(e->message());
    }
  }
  auto run = startRun(plan, 0, extended);
  run->overrides = overrides_;
  finishRun(*run, outcomeForError(sqlstate), sqlstate, message);
}

void ClientSession::failExtendedExplain(const std::shared_ptr<const StatementPlan>& plan, std::string error) {
  // The server now ignores everything up to Sync: the EXPLAIN's error answers the Parse or Bind,
  // which is dropped with the rest of the batch.
  recordExplainFailure(plan, true, error);
  std::string sqlstate;
  if (error.size() > 5) {
    auto e = protocol::parseErrorFields(std::string_view(error).substr(5));
    if (e) sqlstate = std::string(e->sqlstate());
  }
  queueLocal(std::move(error), false);
  server_skipping_ = true;
  skipped_.begin(sqlstate, "an earlier message in the same batch failed",
                 static_cast<size_t>(config_->limits.max_prepared_statements));
}

// ---------------------------------------------------------------------------------------------
// cost_gate: EXPLAIN on the session's own server connection
// ---------------------------------------------------------------------------------------------

namespace {
// Statement and portal name of the gate's EXPLAIN (closed again before the client goes on).
constexpr const char* kExplainName = "pgwarden_cost_gate";
}  // namespace

bool ClientSession::runExplain(const std::string& text, bool extended, const ExplainArgs& args) {
  if (!server_) return false;
  Pending p(Expect::kExplain);
  std::string& out = server_->out();
  if (!extended) {
    p.explain_simple = true;
    protocol::writeQuery(out, text);
  } else {
    // Named, so the client's unnamed statement and portal are left alone; a Flush (not a Sync)
    // so the client's own batch and transaction go on undisturbed.
    protocol::writeParse(out, kExplainName, text, args.param_types);
    protocol::BindMsg b;
    b.portal = kExplainName;
    b.statement = kExplainName;
    if (args.bound) {
      b.param_formats = args.param_formats;
      b.params.reserve(args.params.size());
      for (const auto& v : args.params) {
        b.params.push_back(v ? std::optional<std::string_view>(*v) : std::nullopt);
      }
    }
    protocol::writeBind(out, b);
    protocol::writeExecute(out, kExplainName, 0);
    protocol::writeClose(out, 'P', kExplainName);
    protocol::writeClose(out, 'S', kExplainName);
    protocol::writeFlush(out);
    p.explain_closes = 2;
    unsynced_ = true;
  }
  pushPending(std::move(p));
  flushServer();
  return true;
}

bool ClientSession::handleExplainMessage(const protocol::Frame& f, Pending& head) {
  switch (f.type) {
    case 'D':
      if (head.explain_json.empty()) {
        auto cells = protocol::parseDataRowValues(f.body);
        if (cells && !cells->empty() && (*cells)[0]) head.explain_json.assign(*(*cells)[0]);
      }
      return true;
    case 'E':
      head.explain_error.assign(f.raw.data(), f.raw.size());
      if (!head.explain_simple) {
        std::string error = std::move(head.explain_error);
        pending_.pop_front();
        gate_->explainFailed(std::move(error));
      }
      return true;
    case '3':
      if (!head.explain_simple && --head.explain_closes == 0) {
        std::string json = std::move(head.explain_json);
        pending_.pop_front();
        gate_->explainDone(std::move(json));
      }
      return true;
    case 'Z':
      if (head.explain_simple) {
        auto z = protocol::parseReadyForQuery(f.body);
        if (z) {
          tx_status_ = z->status;
          if (server_) server_->setTxStatus(z->status);
        }
        std::string json = std::move(head.explain_json);
        std::string error = std::move(head.explain_error);
        pending_.pop_front();
        if (!error.empty()) {
          gate_->explainFailed(std::move(error));
        } else {
          gate_->explainDone(std::move(json));
        }
        return true;
      }
      break;
    case 'T':
    case 'C':
    case '1':
    case '2':
      return true;
    default:
      break;
  }
  spdlog::error("{}: unexpected message '{}' from the server during the cost gate's EXPLAIN",
                logPrefix(), logsafe(f.type));
  terminate("08P01", "protocol error between pgwarden and the database; reconnect");
  return false;
}

}  // namespace pgwarden::daemon
