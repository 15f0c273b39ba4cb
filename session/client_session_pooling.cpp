// Client session, transaction pooling (docs/operations.md): with pool_mode transaction the session
// holds a server connection only while a transaction is open or the server owes it answers.
// Before a message that needs the server it takes a free connection (or waits for one, first come
// first served), brings the connection's carried settings in line with the client's, and maps the
// client's prepared statements to the ones the connection holds (preparing them there on first
// use); when the server is idle again at ReadyForQuery it gives the connection back, as it is.
// The parameter sync runs in session mode too, when the connection is first attached.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_text.h"
#include "guards/pooled_state_check.h"
#include "pool/carried_settings.h"
#include "session/client_session.h"

namespace pgwarden::session {

namespace {

const std::string* carriedValue(const ParamList& params, std::string_view name) {
  for (const auto& [n, v] : params) {
    if (n == name) return &v;
  }
  return nullptr;
}

void setCarried(ParamList& params, std::string_view name, std::string_view value) {
  for (auto& [n, v] : params) {
    if (n == name) {
      v = std::string(value);
      return;
    }
  }
  params.emplace_back(std::string(name), std::string(value));
}

std::string completeMessage(char type) { return std::string{type, 0, 0, 0, 4}; }

}  // namespace

std::string ClientSession::paramSyncSql() {
  return pool::carriedSyncSql(*server_.conn(), caller_.client_params);
}

// RESET of a carried setting goes back to what the client started with, as on a direct
// connection (a pooled connection's reset values are pgwarden's login values). The client sees
// RESET's own command tag (sendCommandComplete).
std::optional<std::string> ClientSession::resetSql(const StatementPlan& plan,
                                                   std::string_view sql) const {
  if (!plan.analysis || !plan.analysis->ok) return std::nullopt;
  return pool::resetsToStartup(sql, plan.analysis->statements, server_.startupParams());
}


void ClientSession::choosePoolMode() {
  const std::string& mode = caller_.policy ? caller_.policy->poolMode() : std::string();
  server_.setTransactionPooled(mode.empty() ? config_->pool.mode == pool::PoolMode::kTransaction
                                            : mode == "transaction");
}

bool ClientSession::takeServer() {
  if (server_) return true;
  if (pause_.pool()) return false;
  pool::Pool& pool =
      host_.pools().pool(caller_.server_database, false, writes_ != nullptr,
                         caller_.policy != nullptr && caller_.policy->readReplicas());
  if (pool::PooledConnection* c = pool.takeIdle()) {
    if (auto* s = dynamic_cast<pool::ServerConnection*>(c)) {
      attachForTransaction(*s);
      return true;
    }
  }
  pause_.waitForServer(pool);
  server_.waitStarted(uv_hrtime());
  pool.acquire(this);  // onServerReady on a later loop turn
  return false;
}

void ClientSession::attachForTransaction(pool::ServerConnection& c) {
  if (c.assignments() > 0) ++host_.counters().pool_reuse;
  server_.attach(c);
  c.attach(this, id_);
  std::string sql = paramSyncSql();
  if (sql.empty()) return;
  Pending p(Expect::kInternal);
  p.internal().param_sync = true;
  replies_.pushFront(std::move(p));
  protocol::writeQuery(server_->out(), sql);
}

void ClientSession::returnServerIfIdle() {
  if (!server_.transactionPooled() || !server_ || state_ != ClientState::kReady) return;
  // A message whose verdict waits on a webhook or the budget store leaves the connection to
  // others meanwhile; one waiting for the cost gate's EXPLAIN owes the server an answer.
  const bool paused = pause_.holdsMessage() && !(gate_ && gate_->waitingOutside());
  if (!replies_.empty() || server_.txStatus() != 'I' || replies_.unsynced() || paused ||
      pause_.reason() == PauseReason::kWriteStep || replies_.skipping() || chunk_run_ ||
      server_->txStatus() != 'I' || server_->state() != pool::ServerState::kActive ||
      server_->pendingBytes() > 0) {
    return;
  }
  pool::ServerConnection* s = server_.detach();
  client_.serverGone();
  s->giveBack();
}

bool ClientSession::needsServer(char type) const {
  // With nothing on the server, pgwarden answers a Sync itself and a Flush has nothing to do.
  return protocol::frontendMessage(type).needs_server;
}

// ---------------------------------------------------------------------------------------------
// Prepared statements across server connections
// ---------------------------------------------------------------------------------------------

void ClientSession::answerLastHere(char complete_type) {
  // The message's own entry, just queued: its answer is ours, in its turn.
  replies_.answerLastHere(completeMessage(complete_type), server_.txStatus(), client_->out());
}

void ClientSession::sendParse(std::string_view name, std::string_view sql,
                              const std::vector<uint32_t>& types, const protocol::Frame* raw) {
  replies_.batchOpened();
  if (!server_.transactionPooled()) {
    if (raw) {
      server_->out().append(raw->raw.data(), raw->raw.size());
    } else {
      protocol::writeParse(server_->out(), name, sql, types);
    }
    return;
  }
  if (!server_.parse(name, sql, types, replies_)) {
    answerLastHere(protocol::be::kParseComplete);  // the connection holds it already
  }
}

void ClientSession::forwardPooled(const protocol::Frame& f) {
  std::string& out = server_->out();
  switch (f.type) {
    case protocol::fe::kBind: {
      auto b = protocol::parseBind(f.body);
      const std::string* mapped = b ? server_.serverStatement(b->statement, replies_) : nullptr;
      if (!mapped || *mapped == b->statement) break;
      protocol::BindMsg renamed = *b;
      renamed.statement = *mapped;
      protocol::writeBind(out, renamed);
      return;
    }
    case protocol::fe::kDescribe: {
      auto d = protocol::parseDescribe(f.body);
      if (!d || d->kind != 'S') break;
      const std::string* mapped = server_.serverStatement(d->name, replies_);
      if (!mapped || *mapped == d->name) break;
      protocol::writeDescribe(out, 'S', *mapped);
      return;
    }
    case protocol::fe::kClose: {
      auto c = protocol::parseClose(f.body);
      if (!c || c->kind != 'S') break;
      // The client's name goes; the connection keeps the statement for whoever sends the text
      // next (or until it is the least recently used).
      server_.closeStatement(c->name);
      answerLastHere(protocol::be::kCloseComplete);
      return;
    }
    default:
      break;
  }
  out.append(f.raw.data(), f.raw.size());
}

// ---------------------------------------------------------------------------------------------
// Carried settings: the client's SETs, followed so the next connection gets them too
// ---------------------------------------------------------------------------------------------

void ClientSession::noteServerParameter(const protocol::Frame& f) {
  if (!server_.transactionPooled()) return;
  auto p = protocol::parseParameterStatus(f.body);
  if (!p) return;
  for (const std::string_view name : guards::carriedSettings()) {
    if (name == p->name) setCarried(caller_.client_params, name, p->value);
  }
}

void ClientSession::noteCarriedSet(const StatementRun& run) {
  if (!server_.transactionPooled() || !server_ || !run.plan || !run.plan->analysis) return;
  const auto& statements = run.plan->analysis->statements;
  if (run.index >= statements.size()) return;
  const analysis::StatementInfo& st = statements[run.index];
  if (st.set_local ||
      (st.kind != analysis::StatementKind::kSet && st.kind != analysis::StatementKind::kReset))
    return;
  const std::string_view name = guards::carriedSetting(st.setting);
  // Reported settings follow the server's ParameterStatus; the others are noted here.
  if (name.empty() || pool::isReportedSetting(name)) return;
  std::string value;
  if (st.kind == analysis::StatementKind::kSet && st.setting_value != "default") {
    value = st.setting_value;
  } else if (const std::string* initial = carriedValue(server_.startupParams(), name)) {
    value = *initial;
  }
  if (value.empty()) {
    caller_.client_params.erase(
        std::remove_if(caller_.client_params.begin(), caller_.client_params.end(),
                       [&](const auto& kv) { return kv.first == name; }),
        caller_.client_params.end());
  } else {
    setCarried(caller_.client_params, name, value);
  }
  server_->noteUnreported(name, value);
}

}  // namespace pgwarden::session
