// Guarded writes over MCP: the conversation's held connection and state (WriteConversation), and
// the begin / execute / commit / rollback calls (WriteToolCall). Each statement goes through the
// StatementRunner, so the StatementGate judges it (the WriteTransaction first) and the
// StatementRecorder records it once; the savepoint around a write is the runner's.
#include "mcp/write_tools.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/log_text.h"
#include "mcp/result_json.h"
#include "pool/pool.h"

namespace pgwarden::mcp {

using session::TxnEnd;
using session::TxnEvent;
using session::TxnState;

WriteConversation::WriteConversation(McpHost& host, McpIdentity who, uint64_t session_id)
    : host_(host), who_(std::move(who)), session_id_(session_id), txn_(who_.policy->writes()) {}

WriteConversation::~WriteConversation() {
  cancelAcquire();
  dropConnection("the MCP session is gone");
}

uint64_t WriteConversation::now() const { return uv_now(host_.loop()); }

std::vector<std::string> WriteConversation::nextMoves() const {
  switch (txn_.state()) {
    case TxnState::kNone:
    case TxnState::kRolledBack:
      return {"begin"};
    case TxnState::kOpen:
      return {"execute", "commit", "rollback"};
    case TxnState::kFailed:
      return {"rollback"};
  }
  return {};
}

bool WriteConversation::allows(Tool tool) const {
  if (txn_.state() == TxnState::kRolledBack) return isWriteTool(tool);
  for (const auto& m : nextMoves()) {
    if (m == toolName(tool)) return true;
  }
  return false;
}

bool WriteConversation::claim() {
  if (busy_ || ended_) return false;
  busy_ = true;
  return true;
}

void WriteConversation::release() {
  busy_ = false;
  const TxnState s = txn_.state();
  if (ended_ || (s != TxnState::kOpen && s != TxnState::kFailed)) {
    dropConnection(ended_ ? "the MCP session ended" : "");
  }
}

void WriteConversation::acquire(Acquired done) {
  if (server_) {
    done(true, {}, {});
    return;
  }
  // The answer comes on a later loop turn, never inside this call.
  acquired_ = std::move(done);
  waiting_pool_ = &host_.writePool(who_.server_database);
  waiting_pool_->acquire(this);
}

void WriteConversation::cancelAcquire() {
  acquired_ = nullptr;
  if (waiting_pool_) waiting_pool_->cancelWait(this);
  waiting_pool_ = nullptr;
}

void WriteConversation::onServerReady(pool::ServerConnection& c) {
  waiting_pool_ = nullptr;
  server_ = &c;
  c.attach(this);
  Acquired done = std::move(acquired_);
  acquired_ = nullptr;
  if (done) {
    done(true, {}, {});
  } else {
    dropConnection("");
  }
}

void WriteConversation::onServerFailed(const std::string& sqlstate, const std::string& message) {
  waiting_pool_ = nullptr;
  Acquired done = std::move(acquired_);
  acquired_ = nullptr;
  if (done) done(false, sqlstate, message);
}

pool::ServerConnection* WriteConversation::lend(pool::ServerLink& to) {
  if (server_) server_->attach(&to);
  return server_;
}

void WriteConversation::takeBack(pool::ServerConnection* c, int rfq_owed) {
  if (!c || rfq_owed != 0) {
    // Lost, or left mid-statement (shutdown): the transaction is gone with the connection.
    if (c) c->release(rfq_owed, false);
    server_ = nullptr;
    forget("its connection is gone");
    return;
  }
  server_ = c;
  c->attach(this);
}

guards::Verdict WriteConversation::undone(guards::GuardResult over) {
  host_.writeCounted(0, true);
  return who_.policy->renderOutside("guarded_writes", std::move(over));
}

std::optional<guards::Verdict> WriteConversation::afterRun(const RunResult& r) {
  if (r.kind == RunResult::Kind::kDenied && r.plan) {
    return txn_.afterDenial(r.plan->decision.deny.code, now());
  }
  if (r.txn_status == '\0') return std::nullopt;    // it never reached the server
  if (server_) server_->setTxStatus(r.txn_status);  // what the connection's reset must undo
  const auto end = txn_.afterStatement(r.txn_status, r.last_tag, now());
  if (!end.moved) {
    spdlog::warn("mcp session {}: write mode: no move from {} on ReadyForQuery '{}'", session_id_,
                 session::txnStateName(txn_.state()), logsafe(r.txn_status));
  }
  if (end.ended) host_.writeTransactionEnded(*end.ended);
  return end.notice;
}

void WriteConversation::noteLooked(std::string_view qualified_table) {
  analysis::StatementInfo st;
  auto& r = st.relations.emplace_back();
  const auto dot = qualified_table.find('.');
  if (dot != std::string_view::npos) r.schema = std::string(qualified_table.substr(0, dot));
  r.name = std::string(dot == std::string_view::npos ? qualified_table
                                                     : qualified_table.substr(dot + 1));
  txn_.noteRead(st);
}

void WriteConversation::tick(uint64_t now_ms) {
  if (busy_ || !server_) return;
  const auto why = txn_.due(now_ms);
  if (!why) return;
  const auto lost = txn_.totals();
  if (!txn_.move(TxnEvent::kExpired, now_ms)) return;
  spdlog::info("mcp session {}: rolling back a write transaction ({}): lost {}", session_id_,
               session::txnEndName(*why), logsafe(lost.summary, kLogMessageMaxBytes));
  host_.writeTransactionEnded(txn_.expiredBy());
  txn_.clear();
  // The connection's reset sends the ROLLBACK; the next call is told TRANSACTION_ROLLED_BACK.
  pool::ServerConnection* c = server_;
  server_ = nullptr;
  c->release(0, false);
}

void WriteConversation::end(const char* why) {
  ended_ = true;
  cancelAcquire();
  if (!busy_) dropConnection(why);
}

void WriteConversation::forget(const char* why) {
  const TxnState s = txn_.state();
  if (s != TxnState::kOpen && s != TxnState::kFailed) return;
  spdlog::info("mcp session {}: {}; write transaction rolled back, lost {}", session_id_, why,
               logsafe(txn_.totals().summary, kLogMessageMaxBytes));
  host_.writeTransactionEnded(TxnEnd::kDisconnect);
  (void)txn_.move(TxnEvent::kServerIdle, now());
  txn_.clear();
}

void WriteConversation::dropConnection(const char* why) {
  forget(why);
  if (!server_) return;
  pool::ServerConnection* c = server_;
  server_ = nullptr;
  c->release(0, false);  // ROLLBACK (when in a transaction) and DISCARD ALL before it is lent again
}

void WriteConversation::onServerMessage(pool::ServerConnection&, const protocol::Frame& f) {
  // Nothing runs: the server speaks only to end the connection (a FATAL before it closes).
  if (f.type == protocol::be::kErrorResponse) {
    auto e = protocol::parseErrorFields(f.body);
    spdlog::warn("mcp session {}: the write transaction's server said: {}", session_id_,
                 logsafe(e ? e->message() : std::string_view("?"), kLogMessageMaxBytes));
  }
}

void WriteConversation::onServerLost(pool::ServerConnection&, const std::string& why) {
  server_ = nullptr;
  spdlog::warn("mcp session {}: the write transaction's connection was lost: {}", session_id_, why);
  takeBack(nullptr, 0);
}

namespace {

const char* stateWords(TxnState s) {
  switch (s) {
    case TxnState::kNone:
      return "no transaction is open";
    case TxnState::kOpen:
      return "a transaction is open";
    case TxnState::kFailed:
      return "the transaction failed (a statement in it was refused by the database)";
    case TxnState::kRolledBack:
      return "pgwarden rolled the transaction back";
  }
  return "?";
}

class WriteToolCall final : public RunningCall {
 public:
  WriteToolCall(McpHost& host, CallContext ctx, Tool tool, Json args, Done done)
      : host_(host),
        ctx_(std::move(ctx)),
        conv_(ctx_.writes),
        tool_(tool),
        args_(std::move(args)),
        done_(std::move(done)) {}
  ~WriteToolCall() override {
    runner_.reset();  // gives the connection back first
    if (claimed_) conv_->release();
  }
  WriteToolCall(const WriteToolCall&) = delete;
  WriteToolCall& operator=(const WriteToolCall&) = delete;

  void start() override;
  void cancel() override;
  bool finished() const override { return finished_; }

 private:
  void run(std::string sql);
  void onRun(RunResult&& r);
  void refuse(const char* code, std::string message);
  // The transaction's state, next moves and the notice, added to a result.
  void addState(Json& out, const std::optional<guards::Verdict>& notice) const;
  void finish(Json out, bool is_error, const char* outcome, const std::string& heading);

  McpHost& host_;
  CallContext ctx_;
  std::shared_ptr<WriteConversation> conv_;
  Tool tool_;
  Json args_;
  Done done_;
  std::unique_ptr<StatementRunner> runner_;  // declared after conv_: freed before it
  bool claimed_ = false;
  bool acquiring_ = false;
  bool finished_ = false;
};

void WriteToolCall::start() {
  if (!conv_->claim()) {
    refuse("TRANSACTION_BUSY", std::string(toolName(tool_)) +
                                   " must wait: another call of this transaction is still running; "
                                   "call again once it has answered.");
    return;
  }
  claimed_ = true;
  if (!conv_->allows(tool_)) {
    refuse("INVALID_STATE", std::string(toolName(tool_)) +
                                " is not a valid move now: " + stateWords(conv_->state()) + ".");
    return;
  }
  switch (tool_) {
    case Tool::kBegin:
      if (conv_->state() == TxnState::kRolledBack) {
        run("BEGIN");  // the gate tells it TRANSACTION_ROLLED_BACK; no connection is needed
        return;
      }
      acquiring_ = true;
      conv_->acquire([this](bool ok, const std::string& sqlstate, const std::string& message) {
        acquiring_ = false;
        if (ok) {
          run("BEGIN");
          return;
        }
        RunResult r;
        r.kind = RunResult::Kind::kError;
        r.sqlstate = sqlstate;
        r.message = message;
        onRun(std::move(r));
      });
      return;
    case Tool::kExecute:
      run(args_.value("sql", std::string()));
      return;
    case Tool::kCommit:
      run("COMMIT");
      return;
    case Tool::kRollback:
      run("ROLLBACK");
      return;
    case Tool::kQuery:
    case Tool::kExplain:
    case Tool::kPolicy:
    case Tool::kListSchemas:
    case Tool::kListTables:
    case Tool::kDescribeTable:
    case Tool::kSearch:
      refuse("INVALID_STATE", "not a transaction tool");
      return;
  }
}

void WriteToolCall::cancel() {
  if (finished_) return;
  if (acquiring_) {
    acquiring_ = false;
    conv_->cancelAcquire();
    RunResult r;
    r.kind = RunResult::Kind::kError;
    r.cancelled = true;
    r.sqlstate = "57014";
    r.message = "the request was cancelled";
    onRun(std::move(r));
    return;
  }
  if (runner_) runner_->cancel();
}

void WriteToolCall::run(std::string sql) {
  const int64_t max_rows =
      args_.is_object() ? args_.value("max_rows", ctx_.max_rows) : ctx_.max_rows;
  RunSpec spec = runSpec(ctx_, toolName(tool_), std::move(sql), std::min(max_rows, ctx_.max_rows));
  spec.txn = conv_.get();
  runner_ = std::make_unique<StatementRunner>(host_, std::move(spec),
                                              [this](RunResult&& r) { onRun(std::move(r)); });
  runner_->start();
}

void WriteToolCall::onRun(RunResult&& r) {
  const auto notice = conv_->afterRun(r);
  Json out;
  bool is_error = true;
  const char* outcome = "error";
  std::string heading;
  if (r.kind == RunResult::Kind::kDenied && r.plan) {
    out = denialJson(r.plan->decision.deny);
    out["denied"] = true;
    outcome = "denied";
    heading = "pgwarden refused the statement:";
  } else if (r.undone) {
    out = denialJson(*r.undone);
    out["undone"] = true;
    outcome = "denied";
    heading = "pgwarden undid the statement (the transaction is still open):";
  } else if (r.kind == RunResult::Kind::kError || r.cancelled) {
    const auto moves = conv_->nextMoves();
    out = runErrorJson(r, "call " + moves.front());
    outcome = runCancelled(r) ? "cancelled" : "error";
    heading = "The statement failed:";
  } else {
    out = tool_ == Tool::kExecute ? queryResultJson(r) : Json::object();
    is_error = false;
    outcome = "ok";
    heading = notice ? notice->message : std::string("Done.");
  }
  addState(out, notice);
  finish(std::move(out), is_error, outcome, heading);
}

void WriteToolCall::refuse(const char* code, std::string message) {
  const auto moves = conv_->nextMoves();
  std::string list;
  for (const auto& m : moves) list += (list.empty() ? "" : ", ") + m;
  Json out{{"code", code},
           {"message", message + " Valid next moves: " + list + "."},
           {"next_step", "call " + moves.front()}};
  addState(out, std::nullopt);
  finish(std::move(out), true, "denied", "pgwarden refused the call:");
}

void WriteToolCall::addState(Json& out, const std::optional<guards::Verdict>& notice) const {
  out["state"] = session::txnStateName(conv_->state());
  out["next_moves"] = conv_->nextMoves();
  out["notice"] = notice ? denialJson(*notice) : Json(nullptr);
  // TRANSACTION_OPEN's facts: rows and statements so far, seconds left, the next moves in SQL.
  out["transaction"] = notice ? out["notice"]["detail"] : Json(nullptr);
}

void WriteToolCall::finish(Json out, bool is_error, const char* outcome,
                           const std::string& heading) {
  if (finished_) return;
  finished_ = true;
  if (claimed_) {
    // The runner (whose callback this may be) has given the connection back already.
    claimed_ = false;
    conv_->release();
  }
  addCallFacts(out, ctx_);
  Json result = toolResult(std::move(out), is_error, heading);
  Done done = std::move(done_);
  if (done) done(std::move(result), outcome);
}

}  // namespace

std::unique_ptr<RunningCall> makeWriteCall(McpHost& host, CallContext ctx, Tool tool, Json args,
                                           RunningCall::Done done) {
  return std::make_unique<WriteToolCall>(host, std::move(ctx), tool, std::move(args),
                                         std::move(done));
}

}  // namespace pgwarden::mcp
