// Client session, transaction pooling (docs/operations.md): with pool_mode transaction the session
// holds a server connection only while a transaction is open or the server owes it answers.
// Before a message that needs the server it takes a free connection (or waits for one, first come
// first served), brings the connection's carried settings in line with the client's, and maps the
// client's prepared statements to the ones the connection holds (preparing them there on first
// use); when the server is idle again at ReadyForQuery it gives the connection back, as it is.
// The parameter sync runs in session mode too, when the connection is first attached.

#include "session/client_session.h"

#include <atomic>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_text.h"
#include "guards/pooled_state_check.h"
#include "pool/carried_settings.h"

namespace pgwarden::daemon {

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

// Tags of unnamed statements: which client's text a connection's unnamed statement holds.
// Unique in the process (every loop's sessions draw from it).
uint64_t nextUnnamedTag() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::string completeMessage(char type) { return std::string{type, 0, 0, 0, 4}; }

}  // namespace

std::string ClientSession::paramSyncSql() { return carriedSyncSql(*server_, client_params_); }

// RESET of a carried setting goes back to what the client started with, as on a direct
// connection (a pooled connection's reset values are pgwarden's login values). The client sees
// RESET's own command tag (sendCommandComplete).
std::optional<std::string> ClientSession::resetSql(const StatementPlan& plan,
                                                   std::string_view sql) const {
  if (!plan.analysis || !plan.analysis->ok) return std::nullopt;
  return resetsToStartup(sql, plan.analysis->statements, startup_params_);
}


void ClientSession::choosePoolMode() {
  const std::string& mode = policy_ ? policy_->poolMode() : std::string();
  txn_pooling_ = mode.empty() ? config_->pool.mode == PoolMode::kTransaction : mode == "transaction";
}

bool ClientSession::takeServer() {
  if (server_) return true;
  if (pause_.pool()) return false;
  Pool& pool = host_.pools().pool(server_database_, false, writes_ != nullptr,
                                  policy_ != nullptr && policy_->readReplicas());
  if (PooledConnection* c = pool.takeIdle()) {
    if (auto* s = dynamic_cast<ServerConnection*>(c)) {
      attachForTransaction(*s);
      return true;
    }
  }
  pause_.waitForServer(pool);
  wait_started_ns_ = uv_hrtime();
  pool.acquire(this);  // onServerReady on a later loop turn
  return false;
}

void ClientSession::attachForTransaction(ServerConnection& c) {
  if (c.assignments() > 0) ++host_.counters().pool_reuse;
  server_ = &c;
  c.attach(this, id_);
  tx_status_ = c.txStatus();
  std::string sql = paramSyncSql();
  if (sql.empty()) return;
  Pending p(Expect::kInternal);
  p.internal().param_sync = true;
  replies_.pushFront(std::move(p));
  protocol::writeQuery(server_->out(), sql);
}

void ClientSession::returnServerIfIdle() {
  if (!txn_pooling_ || !server_ || state_ != ClientState::kReady) return;
  // A message whose verdict waits on a webhook or the budget store leaves the connection to
  // others meanwhile; one waiting for the cost gate's EXPLAIN owes the server an answer.
  const bool paused = pause_.holdsMessage() && !(gate_ && gate_->waitingOutside());
  if (!replies_.empty() || tx_status_ != 'I' || replies_.unsynced() || paused ||
      pause_.reason() == PauseReason::kWriteStep || replies_.skipping() || chunk_run_ ||
      server_->txStatus() != 'I' || server_->state() != ServerState::kActive ||
      server_->pendingBytes() > 0) {
    return;
  }
  ServerConnection* s = server_;
  server_ = nullptr;
  server_paused_ = false;
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
  replies_.answerLastHere(completeMessage(complete_type), tx_status_, client_.out());
}

const std::string& ClientSession::prepareOnServer(std::shared_ptr<const PreparedText> text, bool internal) {
  std::string evicted;
  std::string& out = server_->out();
  const std::string& name = server_->statements().add(text, &evicted);
  if (!evicted.empty()) {
    protocol::writeClose(out, 'S', evicted);
    replies_.insertBeforeLast(Pending(Expect::kInternalClose));
  }
  protocol::writeParse(out, name, text->sql, text->types);
  if (internal) {
    Pending p(Expect::kInternalParse);
    p.statement().server_text = std::move(text);
    replies_.insertBeforeLast(std::move(p));
  } else {
    replies_.back().statement().server_text = std::move(text);  // the client's own Parse
  }
  return name;
}

void ClientSession::sendParse(std::string_view name, std::string_view sql,
                              const std::vector<uint32_t>& types, const protocol::Frame* raw) {
  replies_.batchOpened();
  if (!txn_pooling_) {
    if (raw) {
      server_->out().append(raw->raw.data(), raw->raw.size());
    } else {
      protocol::writeParse(server_->out(), name, sql, types);
    }
    return;
  }
  auto text = std::make_shared<const PreparedText>(sql, types);
  if (name.empty()) {
    unnamed_text_ = std::move(text);
    unnamed_tag_ = nextUnnamedTag();
    server_->setUnnamedOwner(unnamed_tag_);
    protocol::writeParse(server_->out(), "", sql, types);
    return;
  }
  prepared_texts_[std::string(name)] = text;
  if (server_->statements().find(*text)) {
    answerLastHere(protocol::be::kParseComplete);  // the connection holds it already
    return;
  }
  prepareOnServer(std::move(text), false);
}

const std::string* ClientSession::serverStatement(std::string_view name) {
  static const std::string kUnnamed;
  if (name.empty()) {
    if (unnamed_text_ && server_->unnamedOwner() != unnamed_tag_) {
      // The connection's unnamed statement is not this client's (it moved connections since).
      protocol::writeParse(server_->out(), "", unnamed_text_->sql, unnamed_text_->types);
      replies_.insertBeforeLast(Pending(Expect::kInternalParse));
      server_->setUnnamedOwner(unnamed_tag_);
    }
    return &kUnnamed;
  }
  const auto it = prepared_texts_.find(std::string(name));
  if (it == prepared_texts_.end()) return nullptr;  // the server says it does not exist
  if (const std::string* held = server_->statements().find(*it->second)) return held;
  return &prepareOnServer(it->second, true);
}

void ClientSession::forwardPooled(const protocol::Frame& f) {
  std::string& out = server_->out();
  switch (f.type) {
    case protocol::fe::kBind: {
      auto b = protocol::parseBind(f.body);
      const std::string* mapped = b ? serverStatement(b->statement) : nullptr;
      if (!mapped || *mapped == b->statement) break;
      protocol::BindMsg renamed = *b;
      renamed.statement = *mapped;
      protocol::writeBind(out, renamed);
      return;
    }
    case protocol::fe::kDescribe: {
      auto d = protocol::parseDescribe(f.body);
      if (!d || d->kind != 'S') break;
      const std::string* mapped = serverStatement(d->name);
      if (!mapped || *mapped == d->name) break;
      protocol::writeDescribe(out, 'S', *mapped);
      return;
    }
    case protocol::fe::kClose: {
      auto c = protocol::parseClose(f.body);
      if (!c || c->kind != 'S') break;
      // The client's name goes; the connection keeps the statement for whoever sends the text
      // next (or until it is the least recently used).
      if (c->name.empty()) {
        unnamed_text_.reset();
      } else {
        prepared_texts_.erase(std::string(c->name));
      }
      answerLastHere(protocol::be::kCloseComplete);
      return;
    }
    default:
      break;
  }
  out.append(f.raw.data(), f.raw.size());
}

void ClientSession::forgetFailedPrepare(const Pending& p) {
  if (!txn_pooling_ || !server_) return;
  if (p.kind != Expect::kInternalParse && p.kind != Expect::kParse) return;
  const Pending::Statement& st = p.statement();
  if (st.server_text) server_->statements().erase(*st.server_text);
  server_->setUnnamedOwner(0);
  if (p.kind == Expect::kParse) {
    // The client's Parse failed (or was skipped): as on the server, the name does not exist.
    if (st.name.empty()) {
      unnamed_text_.reset();
    } else {
      prepared_texts_.erase(st.name);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Carried settings: the client's SETs, followed so the next connection gets them too
// ---------------------------------------------------------------------------------------------

void ClientSession::noteServerParameter(const protocol::Frame& f) {
  if (!txn_pooling_) return;
  auto p = protocol::parseParameterStatus(f.body);
  if (!p) return;
  for (const std::string_view name : guards::carriedSettings()) {
    if (name == p->name) setCarried(client_params_, name, p->value);
  }
}

void ClientSession::noteCarriedSet(const StatementRun& run) {
  if (!txn_pooling_ || !server_ || !run.plan || !run.plan->analysis) return;
  const auto& statements = run.plan->analysis->statements;
  if (run.index >= statements.size()) return;
  const guards::StatementInfo& st = statements[run.index];
  if (st.set_local || (st.kind != guards::StatementKind::kSet && st.kind != guards::StatementKind::kReset)) return;
  const std::string_view name = guards::carriedSetting(st.setting);
  // Reported settings follow the server's ParameterStatus; the others are noted here.
  if (name.empty() || isReportedSetting(name)) return;
  std::string value;
  if (st.kind == guards::StatementKind::kSet && st.setting_value != "default") {
    value = st.setting_value;
  } else if (const std::string* initial = carriedValue(startup_params_, name)) {
    value = *initial;
  }
  if (value.empty()) {
    client_params_.erase(std::remove_if(client_params_.begin(), client_params_.end(),
                                        [&](const auto& kv) { return kv.first == name; }),
                         client_params_.end());
  } else {
    setCarried(client_params_, name, value);
  }
  server_->noteUnreported(name, value);
}

}  // namespace pgwarden::daemon
