// Client session, authentication (client -> pgwarden) and attach: the password exchange, then
// acquiring and attaching a pooled server connection (or the admin console) up to the first
// ReadyForQuery.

#include "session/client_session.h"

#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "pool/carried_settings.h"
#include "session/auth_limiter.h"

namespace pgwarden::session {

namespace {

// Longest wait for a database's first catalog statistics before the first ReadyForQuery.

}  // namespace

// ---------------------------------------------------------------------------------------------
// Authentication (client -> pgwarden)
// ---------------------------------------------------------------------------------------------

void ClientSession::beginAuth() {
  caller_.user_config = config_->findUser(caller_.user);
  const config::UserConfig* password_user = caller_.user_config;
  std::string unknown_reason = "no such user";
  if (caller_.user_config && caller_.user_config->method == config::AuthMethod::kTrust) {
    if (client_.viaUnix()) {
      authenticated();
      return;
    }
    // Answered like a name that does not exist, so a probe over TCP cannot find trust users;
    // only the log says what happened.
    password_user = nullptr;
    unknown_reason = "trust user tried to connect over TCP (trust is for the Unix socket only)";
  }
  const config::AuthConfig& a = config_->auth;
  const UnknownUserAuth unknown{a.unknown_user_method, a.unknown_scram_iterations,
                                a.unknown_scram_salt_len, host_.saltKey()};
  login_
      ->startAuth(std::make_unique<ClientAuth>(password_user, caller_.user, unknown,
                                               std::move(unknown_reason)))
      .begin(client_->out());
  setState(ClientState::kAuth);
}

bool ClientSession::handleAuthMessage(const protocol::Frame& f) {
  ClientAuth* auth = login_ ? login_->auth() : nullptr;
  if (!auth) {
    protocolViolation("unexpected password message");
    return false;
  }
  ClientAuth::Outcome o = auth->handle(f.type, f.body, client_->out());
  switch (o.verdict) {
    case ClientAuth::Verdict::kContinue:
      return true;
    case ClientAuth::Verdict::kOk:
      login_->authOver();
      authenticated();
      return state_ != ClientState::kClosing && state_ != ClientState::kClosed;
    case ClientAuth::Verdict::kFailed:
      login_->authOver();
      authFailed(o.reason);
      return false;
    case ClientAuth::Verdict::kProtocolViolation:
      login_->authOver();
      protocolViolation(o.reason);
      return false;
  }
  return false;
}

void ClientSession::authFailed(const std::string& log_reason) {
  auto& c = host_.counters();
  ++c.auth_failures;
  const int n = host_.authLimiter().recordFailure(
      client_.peerHost(), AuthLimiter::userCredential(caller_.user), host_.nowMs());
  spdlog::warn(
      "{}: authentication failed: {} ({} failure{} for this user from this address this minute)",
      logPrefix(), log_reason, n, n == 1 ? "" : "s");
  // Exactly PostgreSQL's words, and the same whether the user exists or not.
  fatal("28P01", "password authentication failed for user \"" + caller_.user + "\"",
        metrics::RejectReason::kAuthFailure);
}

void ClientSession::authenticated() {
  protocol::writeAuthOk(client_->out());
  if (caller_.database == ConsoleSession::kDatabase) {
    if (!config_->isAdmin(caller_.user) && !config_->isStatsUser(caller_.user)) {
      fatal("42501",
            "user \"" + caller_.user + "\" is not an admin user (admin_users, stats_users)",
            metrics::RejectReason::kNotAllowed);
      return;
    }
    admin_ = host_.openConsole(id_, caller_.user, client_.peerHost(), caller_.application_name);
    admin_->welcome(client_->out());
    setState(ClientState::kReady);
    ++host_.counters().clients_ready;
    spdlog::info("{}: admin console opened", logPrefix());
    return;
  }
  const auto mapped = config_->upstream.mapDatabase(caller_.database);
  if (!mapped) {
    fatal("3D000", "database \"" + caller_.database + "\" does not exist",
          metrics::RejectReason::kNotAllowed);
    return;
  }
  if (host_.consoleHolds(caller_.database).disabled) {
    fatal("55000", "database \"" + caller_.database + "\" is not currently accepting connections",
          metrics::RejectReason::kNotAllowed);
    return;
  }
  caller_.server_database = *mapped;
  caller_.group = caller_.user_config->group;
  caller_.policy = config_->findGroup(caller_.group);
  if (caller_.search_path) {
    if (!config_->groupAllowsSearchPath(caller_.group)) {
      fatal("42501",
            "parameter \"search_path\" is not allowed for users of group \"" + caller_.group +
                "\": pgwarden resolves table names against the group's own search_path",
            metrics::RejectReason::kNotAllowed);
      return;
    }
    caller_.client_params.emplace_back("search_path", *caller_.search_path);
  }
  server_.setStartupParams(caller_.client_params);
  choosePoolMode();
  cancel_key_.registerWith(host_, this);
  setState(ClientState::kAcquiring);
  writesSetUp();
  pool::Pool& pool =
      host_.pools().pool(caller_.server_database, false, writes_ != nullptr,
                         caller_.policy != nullptr && caller_.policy->readReplicas());
  pause_.waitForServer(pool);
  server_.waitStarted(uv_hrtime());
  pool.acquire(this);  // onServerReady or onServerFailed comes on a later loop turn
}

void ClientSession::onServerReady(pool::ServerConnection& c) {
  pause_.serverWaitOver();
  if (state_ == ClientState::kReady) {
    // Transaction pooling: the connection the next message waited for.
    host_.poolWaited(true, std::chrono::nanoseconds(server_.waitedNs(uv_hrtime())));
    attachForTransaction(c);
    if (std::optional<GateVerdict> v = pause_.takeVerdict()) {
      actOnVerdict(std::move(*v));
      return;
    }
    if (std::optional<PausedMessage::DeferredExplain> x = pause_.takeExplain()) {
      sendExplain(x->sql, x->extended, x->args);
      return;
    }
    resumeInput();
    return;
  }
  host_.poolWaited(false, std::chrono::nanoseconds(server_.waitedNs(uv_hrtime())));
  if (c.assignments() > 0) ++host_.counters().pool_reuse;
  server_.attach(c);
  c.attach(this, id_);
  // A startup DateStyle that names only a style (pgjdbc's "ISO") or only an order keeps the
  // server's own other part, as on a direct login, not the pooled connection's last client's.
  pool::completeDateStyle(server_.startupParams(), c.loginParameter("DateStyle"));
  pool::completeDateStyle(caller_.client_params, c.loginParameter("DateStyle"));
  setState(ClientState::kAttaching);
  startAttach();
}

void ClientSession::onServerFailed(const std::string& sqlstate, const std::string& message) {
  pause_.serverWaitOver();
  spdlog::warn("{}: no server connection: {}", logPrefix(), logsafe(message, kLogMessageMaxBytes));
  fatal(sqlstate, message,
        sqlstate == "53300" ? metrics::RejectReason::kAcquireTimeout : metrics::RejectReason::kUnreachable);
}

void ClientSession::startAttach() {
  // Apply the client's carried settings where the pooled connection differs; the server reports
  // the new values with ParameterStatus, which the connection records.
  const std::string sql = paramSyncSql();
  if (sql.empty()) {
    finishAttach();
    return;
  }
  Pending p(Expect::kInternal);
  replies_.push(std::move(p));
  protocol::writeQuery(server_->out(), sql);
  flushServer();
}

void ClientSession::onStatsReady() {
  if (state_ != ClientState::kAttaching || !login_ || !login_->statsWaitOver(host_.nowMs(), true)) {
    return;
  }
  finishAttach();
}

void ClientSession::finishAttach() {
  // Holding the first ReadyForQuery until the database's first statistics load ends (bounded),
  // so the first statements are judged with table sizes known.
  if (login_ && login_->firstAttachEnd()) {
    // The database answered a login, so it exists: keep catalog statistics for it.
    host_.watchDatabase(caller_.server_database);
    if (host_.waitForStats(caller_.server_database, id_)) {
      login_->waitForStats(host_.nowMs());
      return;
    }
  }
  setState(ClientState::kReady);
  ++host_.counters().clients_ready;
  std::string& out = client_->out();
  for (const auto& [n, v] : server_->parameters()) protocol::writeParameterStatus(out, n, v);
  cancel_key_.writeBackendKeyData(out);
  protocol::writeReadyForQuery(out, server_->txStatus());
  spdlog::info("{}: connected group={} application_name={} server_db={} via={}", logPrefix(),
               caller_.group, logsafe(caller_.application_name), logsafe(caller_.server_database),
               client_.viaUnix() ? "unix" : "tcp");
  if (client_->open() && !client_->reading() && !client_.clientPaused()) {
    if (client_->startRead() != 0) {
      closeSession("cannot read from the client");
      return;
    }
  }
  processInput();
}

}  // namespace pgwarden::session
