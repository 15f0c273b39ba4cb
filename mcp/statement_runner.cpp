#include "mcp/statement_runner.h"

#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "history/record.h"
#include "pool/carried_settings.h"
#include "pool/pool.h"
#include "protocol/messages.h"
#include "session/result_screen.h"

namespace pgwarden::mcp {

using daemon::GateRequest;
using daemon::GateVerdict;
using daemon::StatementRun;
using history::Outcome;

namespace {

constexpr size_t kMaxNotices = 50;
constexpr uint64_t kStatsWaitMs = 3000;  // as long as a SQL session waits at login
constexpr uint64_t kStatsPollMs = 20;
constexpr const char* kNotExecuted = "not executed: an earlier statement in the same query failed";

}  // namespace

StatementRunner::StatementRunner(McpHost& host, RunSpec spec, Done done)
    : host_(host), spec_(std::move(spec)), done_(std::move(done)) {}

StatementRunner::~StatementRunner() {
  stopStatsTimer();
  if (waiting_pool_) waiting_pool_->cancelWait(this);
  if (server_) {
    // Only at shutdown: the answer is owed still, so the connection drains (or closes).
    if (step_ == Step::kRunning || step_ == Step::kExplaining) {
      host_.cancelServerQuery(server_->backendPid(), server_->backendKey(), server_->cancelFence());
      releaseServer(1);
    } else {
      releaseServer(0);
    }
  }
  if (run_ && !run_->finished) finishRun(*run_, Outcome::kAborted, "57P01", "pgwarden is shutting down");
  gate_.reset();
}

void StatementRunner::start() {
  started_us_ = history::wallClockMicros();
  if (spec_.internal) {
    work_sql_ = spec_.sql;
    acquire();
    return;
  }
  if (host_.statsLoading(spec_.who.server_database)) {
    // As a SQL session waits at login: the first statements are judged with table sizes known.
    step_ = Step::kStats;
    stats_deadline_ms_ = uv_now(host_.loop()) + kStatsWaitMs;
    stats_timer_ = new uv_timer_t;
    uv_timer_init(host_.loop(), stats_timer_);
    stats_timer_->data = this;
    uv_timer_start(stats_timer_, &StatementRunner::onStatsTimer, kStatsPollMs, kStatsPollMs);
    return;
  }
  judge();
}

void StatementRunner::onStatsTimer(uv_timer_t* t) {
  auto* self = static_cast<StatementRunner*>(t->data);
  if (!self) return;
  if (self->host_.statsLoading(self->spec_.who.server_database) && uv_now(t->loop) < self->stats_deadline_ms_) return;
  self->stopStatsTimer();
  self->judge();
}

void StatementRunner::stopStatsTimer() {
  if (!stats_timer_) return;
  stats_timer_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(stats_timer_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  stats_timer_ = nullptr;
}

void StatementRunner::judge() {
  step_ = Step::kJudging;
  gate_ = std::make_unique<daemon::StatementGate>(host_.gateServices(spec_.who.server_database), *this,
                                                  [this](GateVerdict v) { onVerdict(std::move(v)); });
  GateRequest r;
  r.sql = spec_.sql;
  r.overrides = guards::parseSqlComment(spec_.sql);
  r.admit = !spec_.explain_only;
  r.explain = GateRequest::Explain::kRun;
  r.extended = spec_.bind;
  if (spec_.bind) {
    r.explain_args.params = spec_.params;
    r.explain_args.bound = true;
  }
  r.plan_check = spec_.plan_check;
  r.refusal = std::move(spec_.refusal);
  GateVerdict v;
  if (gate_->decide(std::move(r), v)) act(std::move(v));
}

guards::RequestContext StatementRunner::requestContext(bool extended, const guards::AgentOverrides& ov) const {
  guards::RequestContext ctx;
  ctx.user = spec_.who.user;
  ctx.database = spec_.who.database;
  ctx.group = spec_.who.group;
  ctx.agent_id = ov.agent_id ? std::string_view(*ov.agent_id) : std::string_view(spec_.agent_id);
  ctx.conversation_id =
      ov.conversation_id ? std::string_view(*ov.conversation_id) : std::string_view(spec_.conversation_id);
  ctx.query_intent = ov.query_intent ? std::string_view(*ov.query_intent) : std::string_view(spec_.query_intent);
  ctx.application_name = spec_.application_name;
  ctx.tool = spec_.tool;
  ctx.tool_args = spec_.tool_args;
  ctx.client_addr = spec_.client_addr;
  ctx.extended = extended;
  ctx.protocol = "mcp";
  ctx.session_id = spec_.session_id;
  ctx.budgets = host_.budgets();
  ctx.observer = host_.guardObserver();
  return ctx;
}

bool StatementRunner::runExplain(const std::string& sql, bool, const daemon::ExplainArgs& args) {
  explain_sql_ = sql;
  explain_bound_ = args.bound;
  explain_reply_ = true;
  if (server_) {
    sendWork();
  } else {
    acquire();
  }
  return true;
}

void StatementRunner::onVerdict(GateVerdict v) {
  if (done_called_) {
    gate_->discard(v);
    return;
  }
  act(std::move(v));
}

void StatementRunner::act(GateVerdict v) {
  step_ = Step::kJudging;
  overrides_ = v.overrides;
  write_ = std::move(v.write);
  plan_ = std::move(v.plan);
  result_.plan = plan_;
  if (!v.explain_error.empty()) {
    // The cost gate's EXPLAIN failed on the server: that error answers the statement.
    std::string sqlstate;
    std::string message;
    if (v.explain_error.size() > 5) {
      if (auto e = protocol::parseErrorFields(std::string_view(v.explain_error).substr(5))) {
        sqlstate = std::string(e->sqlstate());
        message = std::string(e->message());
        result_.detail = std::string(e->get('D'));
        result_.hint = std::string(e->get('H'));
      }
    }
    if (!spec_.explain_only) {
      auto run = daemon::startRun(plan_, 0, false);
      run->overrides = overrides_;
      finishRun(*run, daemon::outcomeForError(sqlstate), sqlstate, message);
    }
    releaseServer(0);
    fail(sqlstate, message);
    return;
  }
  const auto& d = plan_->decision;
  if (d.denied) {
    host_.recorder().denied(*plan_, requestContext(false, overrides_), spec_.who.policy, overrides_);
    result_.kind = RunResult::Kind::kDenied;
    releaseServer(0);
    complete();
    return;
  }
  for (const auto& w : d.warnings) {
    result_.notices.push_back({"WARNING", w.code.empty() ? w.sqlstate : w.code, w.message, w.detail, w.hint});
  }
  if (spec_.explain_only) {
    // EXPLAIN takes one statement; a second one after it would run unexplained and unrecorded.
    if (!plan_->analysis || !plan_->analysis->ok || plan_->analysis->statements.size() != 1) {
      releaseServer(0);
      fail("42601", "explain takes exactly one statement");
      return;
    }
    // The EXPLAIN is the statement's one history record (tool explain), as for any statement.
    run_ = daemon::startRun(plan_, 0, false);
    run_->overrides = overrides_;
    if (!result_.explain_json.empty()) {
      // The cost gate already ran this EXPLAIN.
      finishRun(*run_, Outcome::kOk);
      run_.reset();
      releaseServer(0);
      complete();
      return;
    }
    work_sql_ = "EXPLAIN (FORMAT JSON) " + spec_.sql;
  } else {
    work_sql_ = d.rewritten_sql ? *d.rewritten_sql : spec_.sql;
    const bool empty_text = plan_->analysis && plan_->analysis->ok && plan_->analysis->statements.empty();
    if (!empty_text) {
      run_ = daemon::startRun(plan_, 0, spec_.bind);
      run_->budget_key = std::move(v.budget_key);
      run_->overrides = overrides_;
      // The screens compare the bound values, as they do for a wire client's Bind.
      if (spec_.bind && !spec_.params.empty()) {
        run_->params = std::make_shared<const std::vector<std::optional<std::string>>>(spec_.params);
      }
      next_statement_ = 1;
    } else {
      next_statement_ = plan_->statements.size();
    }
  }
  if (cancelled_) {
    finishRest(Outcome::kCancelled, "57014", "cancelled by the MCP client before it ran");
    releaseServer(0);
    fail("57014", "the request was cancelled");
    return;
  }
  if (server_) {
    sendWork();
  } else {
    acquire();
  }
}

void StatementRunner::acquire() {
  step_ = Step::kAcquiring;
  if (spec_.txn) {
    // The transaction's own connection, never a pool's.
    if (daemon::ServerConnection* c = spec_.txn->lend(*this)) {
      onServerReady(*c);
    } else {
      onServerFailed("08006",
                     "the transaction's connection to the database is gone; call begin again");
    }
    return;
  }
  // The answer comes on a later loop turn (onServerReady or onServerFailed), never inside this.
  waiting_pool_ = &host_.pool(spec_.who.server_database);
  waiting_pool_->acquire(this);
}

void StatementRunner::onServerReady(daemon::ServerConnection& c) {
  waiting_pool_ = nullptr;
  server_ = &c;
  c.attach(this);
  if (cancelled_) {
    abandonCancelled();
    return;
  }
  if (!spec_.txn) {
    const std::string sync = daemon::carriedSyncSql(c, {});
    if (!sync.empty()) {
      sendTxnStep(TxnStep::kParamSync, sync);
      return;
    }
  }
  sendWork();
}

void StatementRunner::abandonCancelled() {
  releaseServer(0);
  if (gate_ && gate_->waiting()) gate_->cancel();
  finishRest(Outcome::kCancelled, "57014", "cancelled by the MCP client before it ran");
  fail("57014", "the request was cancelled");
}

void StatementRunner::onServerFailed(const std::string& sqlstate, const std::string& message) {
  waiting_pool_ = nullptr;
  if (gate_ && gate_->waiting()) gate_->cancel();
  finishRest(Outcome::kAborted, sqlstate, message);
  fail(sqlstate, message);
}

void StatementRunner::sendWork() {
  if (explain_reply_) {
    step_ = Step::kExplaining;
    if (explain_bound_) {
      writeBound(explain_sql_, false);
    } else {
      protocol::writeQuery(server_->out(), explain_sql_);
    }
  } else if (spec_.txn && write_.wrap && !savepoint_set_) {
    // With the savepoint, the counters the write's count starts from.
    spec_.txn->transaction().beginWrite(write_.table);
    sendTxnStep(TxnStep::kSavepoint, "SAVEPOINT " + std::string(daemon::kWriteSavepoint) + "; " +
                                         spec_.txn->transaction().countersQuery());
    return;
  } else {
    step_ = Step::kRunning;
    if (spec_.bind) {
      writeBound(work_sql_, true);
    } else {
      protocol::writeQuery(server_->out(), work_sql_);
    }
  }
  if (server_->flush() != 0) server_->close("write to the server failed");
}

void StatementRunner::sendTxnStep(TxnStep step, const std::string& sql) {
  step_ = Step::kRunning;
  txn_step_ = step;
  protocol::writeQuery(server_->out(), sql);
  if (server_->flush() != 0) server_->close("write to the server failed");
}

void StatementRunner::onTxnStepDone(char status) {
  const TxnStep step = txn_step_;
  txn_step_ = TxnStep::kNone;
  if (step == TxnStep::kParamSync) {
    if (cancelled_) {
      abandonCancelled();
    } else {
      sendWork();
    }
    return;
  }
  result_.txn_status = status;
  if (step == TxnStep::kCount) {
    txnCounted(status);
    return;
  }
  if (step == TxnStep::kSettle) {
    releaseServer(0);
    complete();
    return;
  }
  if (status != 'T' || cancelled_) {
    // Nothing of the write ran (a savepoint left behind is released with the transaction).
    const bool cancel = cancelled_;
    finishRest(cancel ? Outcome::kCancelled : Outcome::kError, cancel ? "57014" : "25P02",
               cancel ? "cancelled by the MCP client before it ran"
                      : "pgwarden could not set its savepoint");
    releaseServer(0);
    fail(cancel ? "57014" : "25P02",
         cancel ? "the request was cancelled" : "pgwarden could not set its savepoint");
    return;
  }
  savepoint_set_ = true;
  sendWork();
}

void StatementRunner::writeBound(const std::string& sql, bool describe) {
  // The unnamed statement and portal: nothing is left on the pooled connection after the Sync.
  std::string& out = server_->out();
  protocol::writeParse(out, "", sql, {});
  protocol::BindMsg b;
  b.params.reserve(spec_.params.size());
  for (const auto& v : spec_.params) b.params.push_back(v ? std::optional<std::string_view>(*v) : std::nullopt);
  protocol::writeBind(out, b);
  if (describe) protocol::writeDescribe(out, 'P', "");
  protocol::writeExecute(out, "", 0);
  protocol::writeSync(out);
}

void StatementRunner::onServerMessage(daemon::ServerConnection&, const protocol::Frame& f) {
  if (step_ == Step::kDone) return;
  handleMessage(f);
}

void StatementRunner::onServerChunk(daemon::ServerConnection&, char, std::string_view, bool, bool last) {
  // A row too big to keep whole: dropped, and the result says it is incomplete.
  if (!result_.sets.empty()) result_.sets.back().truncated = true;
  if (last && run_) run_->truncated = true;
  huge_row_ = true;
}

void StatementRunner::handleMessage(const protocol::Frame& f) {
  if (txn_step_ != TxnStep::kNone) {
    if (f.type == 'E') {
      auto e = protocol::parseErrorFields(f.body);
      spdlog::warn("mcp session {}: pgwarden's {} step failed: {}", spec_.session_id,
                   txn_step_ == TxnStep::kParamSync ? "settings" : "savepoint",
                   logsafe(e ? e->message() : std::string_view("?"), kLogMessageMaxBytes));
    } else if (f.type == 'D' && spec_.txn) {
      spec_.txn->transaction().noteCounterRow(f.body);  // with the savepoint, or after the write
    } else if (f.type == 'Z') {
      auto z = protocol::parseReadyForQuery(f.body);
      onTxnStepDone(z ? z->status : 'E');
    }
    return;
  }
  if (explain_reply_) {
    switch (f.type) {
      case 'D':
        if (result_.explain_json.empty()) {
          auto cells = protocol::parseDataRowValues(f.body);
          if (cells && !cells->empty() && (*cells)[0]) result_.explain_json.assign(*(*cells)[0]);
        }
        return;
      case 'E':
        explain_error_.assign(f.raw.data(), f.raw.size());
        return;
      case 'Z': {
        explain_reply_ = false;
        step_ = Step::kJudging;
        std::string error = std::move(explain_error_);
        explain_error_.clear();
        if (!error.empty()) {
          result_.explain_json.clear();
          gate_->explainFailed(std::move(error));
        } else {
          gate_->explainDone(result_.explain_json);
        }
        return;
      }
      default:
        return;
    }
  }
  switch (f.type) {
    case 'T': onRowDescription(f); return;
    case 'D': onDataRow(f); return;
    case 'C': onCommandComplete(f); return;
    case 'I':
      if (run_ && !run_->finished) finishRun(*run_, Outcome::kOk);
      return;
    case 'E': onError(f); return;
    case 'N':
      if (result_.notices.size() < kMaxNotices) {
        if (auto e = protocol::parseErrorFields(f.body)) {
          result_.notices.push_back({std::string(e->severity()), std::string(e->sqlstate()),
                                     std::string(e->message()), std::string(e->get('D')),
                                     std::string(e->get('H'))});
        }
      }
      return;
    case 'G':
      protocol::writeCopyFail(server_->out(), "COPY FROM STDIN is not allowed through pgwarden");
      if (server_->flush() != 0) server_->close("write to the server failed");
      return;
    case 'Z': onReady(f); return;
    default:
      return;  // ParameterStatus, NotificationResponse, COPY OUT data: nothing for the tool
  }
}

void StatementRunner::onRowDescription(const protocol::Frame& f) {
  ResultSet set;
  if (auto fields = protocol::parseRowDescriptionFields(f.body)) {
    for (const auto& rf : *fields) set.columns.push_back({std::string(rf.name), rf.type_oid});
  }
  int64_t cap = spec_.max_rows;
  if (run_ && run_->max_rows >= 0 && run_->max_rows < cap) cap = run_->max_rows;
  set.cap = cap;
  result_bytes_ += f.body.size();
  result_.sets.push_back(std::move(set));
  if (run_) run_->bytes_sent += static_cast<int64_t>(f.raw.size());
}

void StatementRunner::onDataRow(const protocol::Frame& f) {
  if (result_.sets.empty()) result_.sets.emplace_back();
  ResultSet& set = result_.sets.back();
  const bool over_rows = set.cap >= 0 && static_cast<int64_t>(set.rows.size()) >= set.cap;
  const bool over_bytes = result_bytes_ + f.body.size() > spec_.max_result_bytes;
  if (over_rows || over_bytes) {
    set.truncated = true;
    if (run_) run_->truncated = true;
    return;
  }
  auto cells = protocol::parseDataRowValues(f.body);
  if (!cells) return;
  std::vector<std::optional<std::string>> row;
  row.reserve(cells->size());
  for (const auto& c : *cells) row.push_back(c ? std::optional<std::string>(std::string(*c)) : std::nullopt);
  set.rows.push_back(std::move(row));
  result_bytes_ += f.body.size();
  if (run_) {
    if (++run_->rows_sent == 1) {
      run_->single_zero = cells->size() == 1 && (*cells)[0] && daemon::isZeroCell(*(*cells)[0]);
    }
    run_->bytes_sent += static_cast<int64_t>(f.raw.size());
  }
}

void StatementRunner::screenResult(daemon::StatementRun& run) {
  // The result screens, as on the wire: what they find reaches the caller as warnings with the
  // same codes and texts (a screen set to deny warns here: the rows are already in the answer).
  if (!daemon::screenMaySpeak(run)) return;
  const auto stats = host_.tableStats(spec_.who.server_database);
  for (const auto& v : daemon::screenRun(run, spec_.who.policy, stats.get())) {
    if (result_.notices.size() >= kMaxNotices) break;
    result_.notices.push_back({"WARNING", v.code, v.message, v.detail, v.hint});
  }
}

void StatementRunner::onCommandComplete(const protocol::Frame& f) {
  auto cc = protocol::parseCommandComplete(f.body);
  const std::string_view tag = cc ? cc->tag : std::string_view();
  if (spec_.txn && !txnCommandComplete(tag)) return;
  if (result_.sets.empty() || !result_.sets.back().command.empty()) result_.sets.emplace_back();
  result_.sets.back().command = std::string(tag);
  if (run_ && !run_->finished) {
    if (tag.rfind("SELECT", 0) != 0 && tag.rfind("FETCH", 0) != 0) {
      // COMMIT/ROLLBACK of a guarded write transaction: the rows it kept or discarded.
      run_->rows_affected = run_->txn_rows >= 0 ? run_->txn_rows : protocol::commandTagCount(tag);
    }
    run_->bytes_sent += static_cast<int64_t>(f.raw.size());
    screenResult(*run_);
    if (counting_) {
      counting_run_ = run_;  // recorded once the count says it was kept
    } else {
      finishRun(*run_, Outcome::kOk);
    }
  }
  run_.reset();
  if (plan_ && !spec_.explain_only && next_statement_ < plan_->statements.size()) {
    run_ = daemon::startRun(plan_, next_statement_++, false);
    run_->overrides = overrides_;
  }
}

bool StatementRunner::txnCommandComplete(std::string_view tag) {
  result_.last_tag = std::string(tag.substr(0, tag.find(' ')));
  const guards::StatementInfo* st = nullptr;
  if (run_ && plan_ && plan_->analysis && run_->index < plan_->analysis->statements.size()) {
    st = &plan_->analysis->statements[run_->index];
  }
  using Wrapped = daemon::WriteTransaction::Wrapped;
  auto done = spec_.txn->transaction().onCommandComplete(
      st, tag,
      write_.wrap ? std::optional<Wrapped>(Wrapped{write_.table, write_.command}) : std::nullopt);
  if (run_ && done.txn_rows >= 0) run_->txn_rows = done.txn_rows;  // history: what COMMIT kept
  counting_ = done.measure;  // the rows of every table it changed are counted at ReadyForQuery
  if (!done.over) return true;
  // Over a cap: the write is answered with TOO_MANY_ROWS and undone at its ReadyForQuery; the
  // rows it returned (RETURNING) are gone with it.
  result_.undone = spec_.txn->undone(std::move(*done.over));
  result_.sets.clear();
  if (run_ && !run_->finished) {
    run_->rows_affected = done.rows;
    finishRun(*run_, Outcome::kError, result_.undone->sqlstate, result_.undone->message);
  }
  run_.reset();
  return false;
}

void StatementRunner::txnCounted(char status) {
  counting_ = false;
  std::shared_ptr<daemon::StatementRun> run = std::move(counting_run_);
  if (status != 'T') {
    // The count failed, and the transaction with it: the write is lost; only ROLLBACK helps.
    if (run)
      finishRun(*run, Outcome::kError, "25P02", "pgwarden could not count the rows it changed");
    releaseServer(0);
    fail("25P02", "pgwarden could not count the rows the write changed; the transaction failed");
    return;
  }
  auto done = spec_.txn->transaction().onCounted();
  if (done.over) {
    // Over a cap: answered with TOO_MANY_ROWS and undone; the rows it returned are gone with it.
    result_.undone = spec_.txn->undone(std::move(*done.over));
    result_.sets.clear();
    if (run) {
      run->rows_affected = done.rows;
      finishRun(*run, Outcome::kError, result_.undone->sqlstate, result_.undone->message);
    }
  } else {
    spec_.txn->written(done.rows);
    if (run) finishRun(*run, Outcome::kOk);
  }
  sendSettle();
}

void StatementRunner::sendSettle() {
  // RELEASE keeps the write; ROLLBACK TO undoes it (over a cap).
  const std::string name(daemon::kWriteSavepoint);
  sendTxnStep(TxnStep::kSettle,
              result_.undone ? "ROLLBACK TO SAVEPOINT " + name + "; RELEASE SAVEPOINT " + name
                             : "RELEASE SAVEPOINT " + name);
}

void StatementRunner::onError(const protocol::Frame& f) {
  auto e = protocol::parseErrorFields(f.body);
  result_.kind = RunResult::Kind::kError;
  if (e) {
    result_.sqlstate = std::string(e->sqlstate());
    result_.message = std::string(e->message());
    result_.detail = std::string(e->get('D'));
    result_.hint = std::string(e->get('H'));
  }
  if (run_ && !run_->finished) {
    run_->bytes_sent += static_cast<int64_t>(f.raw.size());
    finishRun(*run_, daemon::outcomeForError(result_.sqlstate), result_.sqlstate, result_.message);
  }
  run_.reset();
  finishRest(Outcome::kError, result_.sqlstate, kNotExecuted);
}

void StatementRunner::onReady(const protocol::Frame& f) {
  if (run_ && !run_->finished) finishRun(*run_, Outcome::kOk);
  run_.reset();
  if (spec_.txn) {
    auto z = protocol::parseReadyForQuery(f.body);
    result_.txn_status = z ? z->status : 'E';
    if (savepoint_set_ && result_.txn_status == 'T' && counting_) {
      sendTxnStep(TxnStep::kCount, spec_.txn->transaction().countersQuery());
      return;
    }
    if (counting_run_) finishRun(*counting_run_, Outcome::kOk);  // no savepoint to count under
    counting_run_.reset();
    counting_ = false;
    if (savepoint_set_ && result_.txn_status == 'T') {
      // A write that failed left the transaction failed ('E'): only the caller's ROLLBACK helps.
      sendSettle();
      return;
    }
  }
  if (spec_.explain_only && result_.kind == RunResult::Kind::kOk) {
    for (const auto& s : result_.sets) {
      if (!s.rows.empty() && !s.rows[0].empty() && s.rows[0][0]) {
        result_.explain_json = *s.rows[0][0];
        break;
      }
    }
    result_.sets.clear();
  }
  if (spec_.txn || !server_) {
    releaseServer(0);
    complete();
    return;
  }
  // The answer goes out before the connection's reset is sent: the reset is off the caller's path.
  // complete() may destroy this runner, so the connection is let go through a local.
  daemon::ServerConnection* s = server_;
  server_ = nullptr;
  complete();
  s->release(0, false);
}

void StatementRunner::onServerLost(daemon::ServerConnection&, const std::string& why) {
  server_ = nullptr;
  if (spec_.txn) spec_.txn->takeBack(nullptr, 0);
  spdlog::warn("mcp session {}: server connection lost: {}", spec_.session_id, why);
  if (gate_ && gate_->waiting()) gate_->cancel();
  finishRest(Outcome::kAborted, "08006", "the connection to the database was lost");
  fail("08006", "the connection to the database was lost; try again");
}

void StatementRunner::finishRun(StatementRun& run, Outcome outcome, std::string_view sqlstate,
                                std::string_view message) {
  if (run.finished || spec_.internal) {
    run.finished = true;
    return;
  }
  host_.recorder().finish(run, requestContext(false, run.overrides), spec_.who.policy, outcome, sqlstate, message);
}

void StatementRunner::finishRest(Outcome outcome, std::string_view sqlstate, std::string_view message) {
  if (counting_run_ && !counting_run_->finished)
    finishRun(*counting_run_, outcome, sqlstate, message);
  counting_run_.reset();
  if (run_ && !run_->finished) finishRun(*run_, outcome, sqlstate, message);
  run_.reset();
  while (plan_ && !spec_.explain_only && next_statement_ < plan_->statements.size()) {
    auto run = daemon::startRun(plan_, next_statement_++, false);
    run->overrides = overrides_;
    finishRun(*run, outcome, sqlstate, message);
  }
}

void StatementRunner::cancel() {
  if (done_called_ || cancelled_) return;
  cancelled_ = true;
  result_.cancelled = true;
  switch (step_) {
    case Step::kStats:
      stopStatsTimer();
      fail("57014", "the request was cancelled");
      return;
    case Step::kJudging:
      if (gate_ && gate_->waiting()) {
        gate_->cancel();
        releaseServer(0);
        fail("57014", "the request was cancelled");
      }
      return;
    case Step::kAcquiring:
      if (waiting_pool_) {
        waiting_pool_->cancelWait(this);
        waiting_pool_ = nullptr;
      }
      if (gate_ && gate_->waiting()) gate_->cancel();
      finishRest(Outcome::kCancelled, "57014", "cancelled by the MCP client before it ran");
      fail("57014", "the request was cancelled");
      return;
    case Step::kExplaining:
    case Step::kRunning:
      // The server answers with 57014 and ReadyForQuery; the run ends there as usual.
      if (server_) host_.cancelServerQuery(server_->backendPid(), server_->backendKey(), server_->cancelFence());
      return;
    case Step::kDone:
      return;
  }
}

void StatementRunner::releaseServer(int rfq_owed) {
  if (!server_) return;
  daemon::ServerConnection* s = server_;
  server_ = nullptr;
  if (spec_.txn) {
    spec_.txn->takeBack(s, rfq_owed);
    return;
  }
  s->release(rfq_owed, false);
}

void StatementRunner::fail(std::string sqlstate, std::string message) {
  result_.kind = RunResult::Kind::kError;
  result_.sqlstate = std::move(sqlstate);
  result_.message = std::move(message);
  complete();
}

void StatementRunner::complete() {
  if (done_called_) return;
  done_called_ = true;
  step_ = Step::kDone;
  result_.elapsed_us = history::wallClockMicros() - started_us_;
  Done done = std::move(done_);
  if (done) done(std::move(result_));
}

}  // namespace pgwarden::mcp
