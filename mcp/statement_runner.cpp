#include "mcp/statement_runner.h"

#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "history/record.h"
#include "pool/carried_settings.h"
#include "pool/pool.h"
#include "protocol/messages.h"
#include "session/result_screen.h"
#include "session/statement_execution.h"

namespace pgwarden::mcp {

using history::Outcome;
using session::GateRequest;
using session::GateVerdict;
using session::StatementRun;

namespace {

constexpr size_t kMaxNotices = 50;
constexpr uint64_t kStatsPollMs = 20;

}  // namespace

StatementRunner::StatementRunner(McpHost& host, RunSpec spec, Done done)
    : host_(host), spec_(std::move(spec)), done_(std::move(done)) {}

StatementRunner::~StatementRunner() {
  stopStatsTimer();
  closeTimer(answer_timer_);
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
  // Destroyed before its answer (shutdown): every statement of the text gets its record.
  if (!done_called_) finishRest(Outcome::kAborted, "57P01", "pgwarden is shutting down");
  if (counted_running_) host_.statementRunning(-1);
  gate_.reset();
}

void StatementRunner::start() {
  in_call_ = true;
  startWork();
  in_call_ = false;
}

void StatementRunner::startWork() {
  started_us_ = history::wallClockMicros();
  if (spec_.internal) {
    work_sql_ = spec_.sql;
    acquire();
    return;
  }
  // A statement of an open transaction goes on through a PAUSE, as on the wire.
  const bool held = !spec_.txn && host_.consoleHeld(spec_.who.database);
  if (held || host_.statsLoading(spec_.who.server_database)) {
    // As a SQL session waits at login: the first statements are judged with table sizes known.
    // Held by the console (PAUSE, SUSPEND): it waits for RESUME, polled as the statistics are.
    step_ = Step::kStats;
    stats_wait_.begin(uv_now(host_.loop()));
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
  if (!self->spec_.txn && self->host_.consoleHeld(self->spec_.who.database)) {
    // The statistics' bounded wait starts once the hold is over.
    self->stats_wait_.begin(uv_now(t->loop));
    return;
  }
  if (!self->stats_wait_.over(uv_now(t->loop),
                              !self->host_.statsLoading(self->spec_.who.server_database)))
    return;
  self->stopStatsTimer();
  self->judge();
}

void StatementRunner::closeTimer(uv_timer_t*& t) {
  if (!t) return;
  t->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(t),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  t = nullptr;
}

void StatementRunner::stopStatsTimer() { closeTimer(stats_timer_); }

void StatementRunner::judge() {
  step_ = Step::kJudging;
  if (!counted_running_) {
    counted_running_ = true;
    host_.statementRunning(1);
  }
  gate_ =
      std::make_unique<session::StatementGate>(host_.gateServices(spec_.who.server_database), *this,
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
  ctx.request_id = spec_.request_id;
  ctx.traceparent = spec_.traceparent;
  ctx.record_uids = spec_.history_ids.get();
  ctx.client_addr = spec_.client_addr;
  ctx.extended = extended;
  ctx.protocol = "mcp";
  ctx.session_id = spec_.session_id;
  ctx.budgets = host_.budgets();
  ctx.observer = host_.guardObserver();
  return ctx;
}

bool StatementRunner::runExplain(const std::string& sql, bool, const session::ExplainArgs& args) {
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

bool StatementRunner::runParseCheck(const std::string& sql, bool, const std::vector<uint32_t>&) {
  // A write conversation's transaction keeps its rule that a refused statement leaves it open.
  if (spec_.txn) return false;
  // Sent and answered in the EXPLAIN's place (sendWork, handleMessage).
  parse_check_ = true;
  return runExplain(sql, false, {});
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
  write_ = std::move(v.write);
  exec_.judged(v.plan, v.overrides);
  const session::StatementPlan& plan = *v.plan;
  result_.plan = std::move(v.plan);
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
      exec_.begin(result_.plan, v.overrides, nullptr, false, nullptr);
      exec_.error(sqlstate, message, 0);
    }
    releaseServer(0);
    fail(sqlstate, message);
    return;
  }
  const auto& d = plan.decision;
  if (d.denied) {
    host_.recorder().denied(plan, requestContext(false, v.overrides), spec_.who.policy,
                            v.overrides);
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
    if (!plan.analysis || !plan.analysis->ok || plan.analysis->statements.size() != 1) {
      releaseServer(0);
      fail("42601", "explain takes exactly one statement");
      return;
    }
    // The EXPLAIN is the statement's one history record (tool explain), as for any statement.
    exec_.begin(result_.plan, v.overrides, nullptr, false, nullptr);
    if (!result_.explain_json.empty()) {
      // The cost gate already ran this EXPLAIN, on the connection held.
      if (server_ != nullptr) exec_.sentTo(server_->pool().hostLabel());
      exec_.finish(Outcome::kOk);
      releaseServer(0);
      complete();
      return;
    }
    work_sql_ = "EXPLAIN (FORMAT JSON) " + spec_.sql;
  } else {
    work_sql_ = d.rewritten_sql ? *d.rewritten_sql : spec_.sql;
    // The call's own cap reaches the text as the group's does: the server stops at max_rows + 1.
    if (!spec_.bind && plan.analysis && plan.analysis->ok) {
      if (auto capped = guards::doorRowCap(d, *plan.analysis, spec_.sql, spec_.max_rows))
        work_sql_ = std::move(*capped);
    }
    result_.executed_sql = work_sql_;
    result_.rewritten = work_sql_ != spec_.sql;
    // The screens compare the bound values, as they do for a wire client's Bind.
    std::shared_ptr<const session::ScreenParams> params;
    if (spec_.bind && !spec_.params.empty())
      params = std::make_shared<const session::ScreenParams>(spec_.params);
    exec_.begin(result_.plan, v.overrides, std::move(v.budget_key), spec_.bind, std::move(params));
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
    if (pool::ServerConnection* c = spec_.txn->lend(*this)) {
      onServerReady(*c);
    } else {
      onServerFailed("08006",
                     "the transaction's connection to the database is gone; call begin again");
    }
    return;
  }
  // Reads of a group with read_replicas go where the wire's read-only sessions go: a replica in
  // the rotation, else the primary; explain too (EXPLAIN without ANALYZE reads the catalog and
  // the statistics, which a replica replays). A guarded-writes group's stay on the primary, so a
  // read after its commit sees the commit.
  const guards::PolicyGroup* policy = spec_.who.policy;
  const bool replica_ok = policy != nullptr && policy->readReplicas() && !policy->writes().guarded;
  // The answer comes on a later loop turn (onServerReady or onServerFailed), never inside this.
  waiting_pool_ = &host_.pool(spec_.who.server_database, replica_ok);
  waiting_pool_->acquire(this);
}

void StatementRunner::onServerReady(pool::ServerConnection& c) {
  waiting_pool_ = nullptr;
  server_ = &c;
  c.attach(this);
  if (cancelled_) {
    abandonCancelled();
    return;
  }
  if (!spec_.txn) {
    const std::string sync = pool::carriedSyncSql(c, {});
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
    if (parse_check_) {
      // The server's parser only: nothing runs, nothing stays on the connection after the Sync.
      protocol::writeParse(server_->out(), session::kParseCheckName, explain_sql_, {});
      protocol::writeClose(server_->out(), 'S', session::kParseCheckName);
      protocol::writeSync(server_->out());
    } else if (explain_bound_) {
      writeBound(explain_sql_, false);
    } else {
      protocol::writeQuery(server_->out(), explain_sql_);
    }
  } else if (spec_.txn && write_.wrap && !savepoint_set_) {
    // With the savepoint, the counters the write's count starts from.
    spec_.txn->transaction().beginWrite(write_.table);
    sendTxnStep(TxnStep::kSavepoint, spec_.txn->transaction().savepointQuery(
                                         session::WriteTransaction::Savepoint::kSet));
    return;
  } else {
    step_ = Step::kRunning;
    exec_.sentTo(server_->pool().hostLabel());
    if (spec_.bind) {
      writeBound(work_sql_, true);
    } else {
      protocol::writeQuery(server_->out(), work_sql_);
    }
  }
  if (server_->flush() != 0) server_->close("write to the server failed");
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

void StatementRunner::onServerMessage(pool::ServerConnection&, const protocol::Frame& f) {
  if (step_ == Step::kDone) return;
  handleMessage(f);
}

void StatementRunner::onServerChunk(pool::ServerConnection&, char, std::string_view, bool,
                                    bool last) {
  // A row too big to keep whole: dropped, and the result says it is incomplete.
  if (!result_.sets.empty()) result_.sets.back().truncated = true;
  if (last && exec_.run()) exec_.run()->truncated = true;
  huge_row_ = true;
}

void StatementRunner::handleMessage(const protocol::Frame& f) {
  if (txn_step_ != TxnStep::kNone) {
    if (f.type == protocol::be::kErrorResponse) {
      auto e = protocol::parseErrorFields(f.body);
      spdlog::warn("mcp session {}: pgwarden's {} step failed: {}", spec_.session_id,
                   txn_step_ == TxnStep::kParamSync ? "settings" : "savepoint",
                   logsafe(e ? e->message() : std::string_view("?"), kLogMessageMaxBytes));
    } else if (f.type == protocol::be::kDataRow && spec_.txn) {
      spec_.txn->transaction().noteCounterRow(f.body);  // with the savepoint, or after the write
    } else if (f.type == protocol::be::kReadyForQuery) {
      auto z = protocol::parseReadyForQuery(f.body);
      onTxnStepDone(z ? z->status : 'E');
    }
    return;
  }
  if (explain_reply_) {
    switch (f.type) {
      case protocol::be::kDataRow:
        if (result_.explain_json.empty()) {
          auto cells = protocol::parseDataRowValues(f.body);
          if (cells && !cells->empty() && (*cells)[0]) result_.explain_json.assign(*(*cells)[0]);
        }
        return;
      case protocol::be::kErrorResponse:
        explain_error_.assign(f.raw.data(), f.raw.size());
        return;
      case protocol::be::kReadyForQuery: {
        explain_reply_ = false;
        step_ = Step::kJudging;
        std::string error = std::move(explain_error_);
        explain_error_.clear();
        if (parse_check_) {
          parse_check_ = false;
          gate_->parseChecked(std::move(error));
        } else if (!error.empty()) {
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
    case protocol::be::kRowDescription:
      onRowDescription(f);
      return;
    case protocol::be::kDataRow:
      onDataRow(f);
      return;
    case protocol::be::kCommandComplete:
      onCommandComplete(f);
      return;
    case protocol::be::kEmptyQueryResponse:
      exec_.finish(Outcome::kOk);
      return;
    case protocol::be::kErrorResponse:
      onError(f);
      return;
    case protocol::be::kNoticeResponse:
      if (result_.notices.size() < kMaxNotices) {
        if (auto e = protocol::parseErrorFields(f.body)) {
          result_.notices.push_back({std::string(e->severity()), std::string(e->sqlstate()),
                                     std::string(e->message()), std::string(e->get('D')),
                                     std::string(e->get('H'))});
        }
      }
      return;
    case protocol::be::kCopyInResponse:
      protocol::writeCopyFail(server_->out(), "COPY FROM STDIN is not allowed through pgwarden");
      if (server_->flush() != 0) server_->close("write to the server failed");
      return;
    case protocol::be::kReadyForQuery:
      onReady(f);
      return;
    default:
      return;  // ParameterStatus, NotificationResponse, COPY OUT data: nothing for the tool
  }
}

void StatementRunner::onRowDescription(const protocol::Frame& f) {
  ResultSet set;
  // Masked columns (docs/masking.md): their cells become tokens (text) or NULL below.
  const guards::Masking* masking = spec_.who.policy ? spec_.who.policy->masking() : nullptr;
  row_mask_ = masking ? masking->rowMask(f.body, host_.tableStats(spec_.who.server_database).get())
                      : guards::RowMask{};
  if (auto fields = protocol::parseRowDescriptionFields(f.body)) {
    for (size_t i = 0; i < fields->size(); ++i) {
      const bool masked = row_mask_.any && row_mask_.masked[i];
      set.columns.push_back({std::string((*fields)[i].name), masked ? 25u : (*fields)[i].type_oid});
    }
  }
  session::StatementRun* run = exec_.run();
  int64_t cap = spec_.max_rows;
  if (run && run->max_rows >= 0 && run->max_rows < cap) cap = run->max_rows;
  set.cap = cap;
  result_bytes_ += f.body.size();
  result_.sets.push_back(std::move(set));
  if (run) run->bytes_sent += static_cast<int64_t>(f.raw.size());
}

void StatementRunner::onDataRow(const protocol::Frame& f) {
  if (result_.sets.empty()) result_.sets.emplace_back();
  ResultSet& set = result_.sets.back();
  session::StatementRun* run = exec_.run();
  const bool over_bytes = result_bytes_ + f.body.size() > spec_.max_result_bytes;
  if (over_bytes && run) run->truncated = true;
  // The row cap as the wire counts it (daemon::countDataRow), the run's rows against the cap.
  const bool kept =
      !over_bytes && (run ? session::countDataRow(*run, f, set.cap)
                          : set.cap < 0 || static_cast<int64_t>(set.rows.size()) < set.cap);
  if (!kept) {
    set.truncated = true;
    return;
  }
  auto cells = protocol::parseDataRowValues(f.body);
  if (!cells) return;
  std::vector<std::optional<std::string>> row;
  row.reserve(cells->size());
  for (const auto& c : *cells) row.push_back(c ? std::optional<std::string>(std::string(*c)) : std::nullopt);
  if (row_mask_.any && spec_.who.policy && spec_.who.policy->masking()) {
    guards::maskCells(row, row_mask_, *spec_.who.policy->masking());
  }
  set.rows.push_back(std::move(row));
  result_bytes_ += f.body.size();
}

void StatementRunner::screenResult(session::StatementRun& run) {
  // The result screens, as on the wire: what they find reaches the caller as warnings with the
  // same codes and texts, and a finding set to deny answers the text's last statement instead
  // of its rows (a Query's last statement on the wire).
  // An operator tool's statement is bound (the extended protocol, where the wire warns instead),
  // yet its caller, like a query call's, expects nothing after it: a denial answers it too.
  const bool last = exec_.atLast();
  const session::ScreenFindings found = session::screenFindings(
      run, spec_.who.policy, [this] { return host_.tableStats(spec_.who.server_database); }, last);
  for (const guards::Verdict* v : found.warnings) {
    if (result_.notices.size() >= kMaxNotices) break;
    result_.notices.push_back({"WARNING", v->code, v->message, v->detail, v->hint});
  }
  if (found.denial) result_.screen_denial = *found.denial;
}

bool StatementRunner::holdForProbe() {
  session::StatementRun* run = exec_.run();
  if (!run || !server_ || spec_.txn || spec_.explain_only ||
      !session::probeWanted(*run, spec_.who.policy))
    return false;
  pool::PoolManager* pools = host_.probePools();
  metrics::Counters* counters = host_.probeCounters();
  if (!pools || !counters) return false;
  if (!probe_) probe_ = std::make_unique<session::ScreenProbe>(host_.loop(), *pools, *counters);
  return session::holdForProbe(*run, spec_.who.policy,
                               host_.tableStats(spec_.who.server_database).get(), *probe_,
                               spec_.who.server_database, *server_, [this] {
                                 if (server_) server_->releaseInput();
                               });
}

void StatementRunner::onCommandComplete(const protocol::Frame& f) {
  // The screens' probe answers before the statement ends, as on the wire: this message is handed
  // over again once it has.
  if (holdForProbe()) return;
  auto cc = protocol::parseCommandComplete(f.body);
  const std::string_view tag = cc ? cc->tag : std::string_view();
  if (spec_.txn && !spec_.explain_only && !txnCommandComplete(tag)) return;
  if (result_.sets.empty() || !result_.sets.back().command.empty()) result_.sets.emplace_back();
  result_.sets.back().command = std::string(tag);
  session::StatementRun* run = exec_.run();
  if (!run || run->finished) {
    exec_.finish(Outcome::kOk);
    return;
  }
  session::noteCommandComplete(*run, tag, f.raw.size());
  screenResult(*run);
  if (result_.screen_denial) {
    // Denied by a screen: the rows are not the caller's; the statement ends with the denial.
    result_.sets.clear();
    exec_.finish(Outcome::kError, result_.screen_denial->sqlstate, result_.screen_denial->message);
  } else if (counting_) {
    counting_run_ = exec_.detach();  // recorded once the count says it was kept
  } else {
    exec_.finish(Outcome::kOk);
  }
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
  if (counting_run_ && !counting_run_->finished)
    finishRun(*counting_run_, Outcome::kError, result_.sqlstate, session::kNotExecutedInQuery);
  counting_run_.reset();
  exec_.error(result_.sqlstate, result_.message, f.raw.size());
}

void StatementRunner::onReady(const protocol::Frame& f) {
  if (exec_.run()) exec_.finish(Outcome::kOk);
  if (spec_.txn) {
    auto z = protocol::parseReadyForQuery(f.body);
    result_.txn_status = z ? z->status : 'E';
    if (savepoint_set_ && result_.txn_status == 'T' && counting_) {
      sendTxnStep(TxnStep::kCount, spec_.txn->transaction().countersQuery());
      return;
    }
    if (counting_run_)
      finishRun(*counting_run_, Outcome::kOk, {}, {});  // no savepoint to count under
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
  pool::ServerConnection* s = server_;
  server_ = nullptr;
  complete();
  s->release(0, false);
}

void StatementRunner::onServerLost(pool::ServerConnection&, const std::string& why) {
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
  exec_.finishRest(outcome, sqlstate, message);
}

void StatementRunner::cancel() {
  if (done_called_ || cancelled_) return;
  cancelled_ = true;
  result_.cancelled = true;
  // The caller may be iterating over its calls: the answer comes on the next loop turn.
  in_call_ = true;
  cancelStep();
  in_call_ = false;
}

void StatementRunner::cancelStep() {
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
  pool::ServerConnection* s = server_;
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
  if (counted_running_) {
    counted_running_ = false;
    host_.statementRunning(-1);
  }
  result_.elapsed_us = history::wallClockMicros() - started_us_;
  result_.stats_age_s = host_.statsAgeSeconds(spec_.who.server_database);
  if (in_call_) {
    // Never inside start() or cancel() (a denial known at once, a call cancelled before it ran):
    // the answer comes on the next loop turn, as the gate's verdict does.
    answer_timer_ = new uv_timer_t;
    uv_timer_init(host_.loop(), answer_timer_);
    answer_timer_->data = this;
    uv_timer_start(answer_timer_, &StatementRunner::onAnswerTimer, 0, 0);
    return;
  }
  deliver();
}

void StatementRunner::onAnswerTimer(uv_timer_t* t) {
  auto* self = static_cast<StatementRunner*>(t->data);
  if (!self) return;
  closeTimer(self->answer_timer_);
  self->deliver();
}

void StatementRunner::deliver() {
  Done done = std::move(done_);
  if (done) done(std::move(result_));
}

}  // namespace pgwarden::mcp
