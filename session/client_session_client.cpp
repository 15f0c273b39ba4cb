// Client session, proxying client -> server: each message the client sends, forwarded, answered
// by pgwarden or held back, and the statement runs it starts with their history records.

#include "session/client_session.h"

#include "guards/codes.h"
#include "session/client_session_util.h"
#include "session/result_screen.h"

namespace pgwarden::session {

using session_detail::awaitingServer;

// ---------------------------------------------------------------------------------------------
// Proxying: client -> server
// ---------------------------------------------------------------------------------------------

bool ClientSession::handleClientMessage(const protocol::Frame& f) {
  if (admin_) {
    if (admin_->onMessage(f, client_->out())) return true;
    closeSession("client sent Terminate");
    return false;
  }
  if (replies_.skipping()) {
    // As PostgreSQL itself does after an error in an extended-protocol batch: everything up to
    // the next Sync is ignored.
    if (f.type == protocol::fe::kSync) {
      if (replies_.endSkip()) {
        sendTransactionAbort(true);
        queueLocal({}, true);  // the Sync's ReadyForQuery, with the status the abort left
        return true;
      }
      sendSync(f);
      return true;
    }
    if (f.type == protocol::fe::kTerminate) {
      closeSession("client sent Terminate");
      return false;
    }
    noteSkipped(f);
    return true;
  }
  if ((f.type == protocol::fe::kSync || f.type == protocol::fe::kFlush ||
       f.type == protocol::fe::kTerminate) &&
      !f.body.empty()) {
    protocolViolation("invalid message format: " + protocol::messageName(f.type, false) +
                      " carries no body");
    return false;
  }
  if (prepared_.anyAgent() && handleAgentMessage(f)) return true;
  switch (f.type) {
    case protocol::fe::kQuery:
      return handleQuery(f);
    case protocol::fe::kParse:
      return handleParse(f);
    case protocol::fe::kBind:
      return handleBind(f);
    case protocol::fe::kExecute:
      return handleExecute(f);
    case protocol::fe::kClose:
      return handleClose(f);
    case protocol::fe::kDescribe: {
      auto d = protocol::parseDescribe(f.body);
      if (!d) {
        protocolViolation("malformed Describe message: " + d.error());
        return false;
      }
      replies_.push(Pending(d->kind == 'S' ? Expect::kDescribeStatement : Expect::kDescribePortal));
      forward(f);
      return true;
    }
    case protocol::fe::kSync:
      sendSync(f);
      return true;
    case protocol::fe::kFlush:
      forward(f);
      return true;
    case protocol::fe::kTerminate:
      closeSession("client sent Terminate");
      return false;
    case protocol::fe::kFunctionCall: {
      std::string out;
      protocol::writeError(out, "ERROR", "0A000",
                           "the fast-path function call interface is not supported through "
                           "pgwarden; call the function in a SELECT instead");
      queueLocal(std::move(out), true);
      return true;
    }
    case protocol::fe::kCopyData:
    case protocol::fe::kCopyDone:
    case protocol::fe::kCopyFail:
      // CopyData/CopyDone/CopyFail outside COPY FROM STDIN (which pgwarden never starts):
      // ignored, as PostgreSQL ignores them.
      return true;
    case protocol::fe::kPassword:
      protocolViolation("unexpected password message after authentication");
      return false;
    default:
      protocolViolation(std::string("invalid frontend message type ") +
                        std::to_string(static_cast<int>(static_cast<unsigned char>(f.type))));
      return false;
  }
}

void ClientSession::sendSync(const protocol::Frame& f) {
  replies_.syncReceived();
  if (!server_) {
    // Transaction pooling, nothing on the server: the batch ends here.
    replies_.batchClosed();
    queueLocal({}, true);
    return;
  }
  replies_.push(Pending(Expect::kSync));
  forward(f);
}

void ClientSession::forward(const protocol::Frame& f) {
  if (!server_) return;
  if (server_.transactionPooled() &&
      (f.type == protocol::fe::kBind || f.type == protocol::fe::kDescribe ||
       f.type == protocol::fe::kClose)) {
    forwardPooled(f);
  } else {
    server_->out().append(f.raw.data(), f.raw.size());
  }
  replies_.batchMessage(protocol::frontendMessage(f.type).batch);
}

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
    ++host_.counters().warnings_sent;
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
  r.sql = q->sql;
  r.overrides = guards::parseSqlComment(q->sql);
  r.admit = true;
  r.explain = GateRequest::Explain::kRun;
  return judge(f, std::move(r));
}

bool ClientSession::actQuery(const protocol::Frame& f, GateVerdict&& v) {
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
    if (writes_) writesDenied(*plan, out);
    if (denialAbortsTransaction()) sendTransactionAbort(false);
    queueLocal(std::move(out), true);
    return true;
  }
  if (!d.warnings.empty()) {
    std::string out;
    writeWarnings(out, *plan);
    queueLocal(std::move(out), false);
  }
  Pending p(Expect::kQuery);
  Pending::Query& q = p.query();
  q.exec = std::make_unique<TextExecution>(*this);
  q.exec->begin(plan, overrides_, std::move(v.budget_key), false, nullptr);
  if (server_) q.exec->sentTo(server_->pool().hostLabel());
  if (writes_ && v.write.wrap && server_) {
    std::string query;
    if (d.rewritten_sql) {
      ++host_.counters().rewrites;
      protocol::writeQuery(query, *d.rewritten_sql);
    } else {
      query.assign(f.raw.data(), f.raw.size());
    }
    writesBeforeQuery(p, v, std::move(query));
    replies_.push(std::move(p));
    return true;
  }
  if (d.rewritten_sql) {
    ++host_.counters().rewrites;
    protocol::writeQuery(server_->out(), *d.rewritten_sql);
  } else if (auto reset = resetSql(*plan, protocol::parseQuery(f.body)->sql)) {
    protocol::writeQuery(server_->out(), *reset);
  } else {
    forward(f);
  }
  replies_.push(std::move(p));
  return true;
}


bool ClientSession::handleParse(const protocol::Frame& f) {
  auto m = protocol::parseParse(f.body);
  if (!m) {
    protocolViolation("malformed Parse message: " + m.error());
    return false;
  }
  const std::string name(m->statement);
  if (prepared_.statementsFull(name)) {
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
  if (server_.transactionPooled() && server_.hasStatement(name)) {
    // PostgreSQL's answer, given here: the statement lives on no one server connection.
    std::string out;
    protocol::writeError(out, "ERROR", "42P05", "prepared statement \"" + name + "\" already exists");
    queueLocal(std::move(out), false);
    skipBatch("42P05", false);
    return true;
  }
  if (prepared_.agentStatement(name)) {
    if (!name.empty()) {
      std::string out;
      protocol::writeError(out, "ERROR", "42P05", "prepared statement \"" + name + "\" already exists");
      queueLocal(std::move(out), false);
      skipBatch("42P05", false);
      return true;
    }
    prepared_.eraseAgentStatement(name);
  }
  GateRequest r;
  r.sql = m->sql;
  r.overrides = guards::parseSqlComment(m->sql);
  r.extended = true;
  // A Parse is counted against the budget when it is executed.
  r.explain = GateRequest::Explain::kRunOrDefer;
  r.explain_args.param_types = m->param_types;
  return judge(f, std::move(r));
}

bool ClientSession::actParse(const protocol::Frame& f, GateVerdict&& v) {
  auto m = protocol::parseParse(f.body);
  if (!m) return false;  // checked when it arrived
  const std::string name(m->statement);
  std::shared_ptr<const StatementPlan> plan = std::move(v.plan);
  if (!v.explain_error.empty()) {
    failExtendedExplain(plan, std::move(v.explain_error));
    replies_.skipped().statement(name, {plan, true});
    return true;
  }
  const auto& d = plan->decision;
  if (d.denied) {
    // The denial answers the Parse; the server never sees the text. As after any failed Parse,
    // the rest of the batch up to Sync is skipped.
    denyExtended(*plan);
    replies_.skipped().statement(name, {plan, true});  // its record is the denial's
    if (name.empty()) prepared_.forgetPlan(name);
    return true;
  }
  if (d.explain_sql && d.explain_needs_params) {
    // The plan depends on the parameters: the cost gate runs when the Bind brings them.
    prepared_.setTypes(name, m->param_types);
  }
  if (!d.warnings.empty()) {
    std::string out;
    writeWarnings(out, *plan);
    queueLocal(std::move(out), false);
  }
  prepared_.setOverrides(name, overrides_);
  Pending p(Expect::kParse);
  Pending::Statement& st = p.statement();
  st.name = name;
  PreparedRegistry::Previous before = prepared_.prepare(name, plan);
  st.had_previous = before.had;
  st.previous = std::move(before.plan);
  prepared_.setWrite(name, writes_ && v.write.at_execute ? &v.write : nullptr);
  replies_.push(std::move(p));
  if (!server_) return true;
  if (d.rewritten_sql) {
    ++host_.counters().rewrites;
    sendParse(m->statement, *d.rewritten_sql, m->param_types, nullptr);
  } else if (auto reset = resetSql(*plan, m->sql)) {
    sendParse(m->statement, *reset, m->param_types, nullptr);
  } else {
    sendParse(m->statement, m->sql, m->param_types, &f);
  }
  return true;
}

namespace {

// A Bind's lists are decoded into the session's one BindMsg, whose storage is kept from one Bind
// to the next unless a Bind of very many values made it large.
constexpr size_t kKeepBindBytes = 64 * 1024;

Status decodeBind(std::string_view body, protocol::BindMsg& m) {
  const size_t held = m.params.capacity() * sizeof(m.params[0]) +
                      (m.param_formats.capacity() + m.result_formats.capacity()) * sizeof(int16_t);
  if (held > kKeepBindBytes) m = protocol::BindMsg{};
  return protocol::parseBindInto(body, m);
}

}  // namespace

bool ClientSession::handleBind(const protocol::Frame& f) {
  if (auto st = decodeBind(f.body, bind_); !st) {
    protocolViolation("malformed Bind message: " + st.error());
    return false;
  }
  const protocol::BindMsg* b = &bind_;
  const std::string statement(b->statement);
  GateVerdict v;
  v.plan = prepared_.plan(statement);
  if (const guards::AgentOverrides* ov = prepared_.overrides(statement)) v.overrides = *ov;
  if (v.plan && !v.plan->decision.denied && v.plan->decision.explain_sql && caller_.policy &&
      server_) {
    // The cost gate's verdict with these parameters.
    GateRequest r;
    r.plan = std::move(v.plan);
    r.overrides = std::move(v.overrides);
    r.extended = true;
    r.explain = GateRequest::Explain::kRun;
    if (const std::vector<uint32_t>* types = prepared_.types(statement)) {
      r.explain_args.param_types = *types;
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

bool ClientSession::actBind(const protocol::Frame& f, GateVerdict&& v) {
  // Decoded again: the verdict may have come later, after other Binds used bind_.
  if (!decodeBind(f.body, bind_)) return false;  // checked when it arrived
  const protocol::BindMsg* b = &bind_;
  const auto writeOf = [this](std::string_view statement) { return prepared_.write(statement); };
  const std::string portal(b->portal);
  std::shared_ptr<const StatementPlan> plan = std::move(v.plan);
  if (!v.explain_error.empty()) {
    failExtendedExplain(plan, std::move(v.explain_error));
    replies_.skipped().portal(portal, {plan, true});
    return true;
  }
  if (plan && plan->decision.denied) {
    // Denied on its parameters: the denial answers the Bind, the batch is skipped up to Sync.
    denyExtended(*plan);
    replies_.skipped().portal(portal, {plan, true});  // its record is the denial's
    return true;
  }
  if (Portal* existing = prepared_.portal(portal)) {
    // Binding the unnamed portal again replaces it (a named one is an error the server reports).
    if (portal.empty()) {
      auto& run = existing->run;
      if (run && !run->finished && !awaitingServer(run)) finishRun(*run, history::Outcome::kOk);
      // The old run is let go first (a pending answer still holding it keeps it): its values'
      // storage can then be refilled for the new one.
      run.reset();
      std::shared_ptr<ScreenParams> params = std::move(existing->params);
      screenParams(plan.get(), *b, params);
      *existing = Portal{plan, nullptr, overrides_, std::move(params), writeOf(b->statement)};
    }
  } else {
    if (prepared_.portalsFull()) {
      std::string out;
      protocol::writeError(out, "ERROR", "54000",
                           "too many open portals in this session (limit " +
                               std::to_string(config_->limits.max_prepared_statements) +
                               "); close the ones you no longer need");
      queueLocal(std::move(out), false);
      skipBatch("54000", false);
      return true;
    }
    std::shared_ptr<ScreenParams> params = prepared_.spareParams();
    screenParams(plan.get(), *b, params);
    prepared_.addPortal(portal, Portal{plan, nullptr, overrides_, std::move(params), writeOf(b->statement)});
  }
  Pending bind_entry(Expect::kBind);
  bind_entry.bind().plan = plan;
  bind_entry.bind().name = portal;
  replies_.push(std::move(bind_entry));
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
  const Portal* portal = prepared_.portal(std::string(e->portal));
  if (portal && (!portal->run || portal->run->finished)) {
    // A new execution: it counts against the budget now, once (a suspended portal's later
    // Executes continue the same run).
    v.plan = portal->plan;
    v.overrides = portal->overrides;  // the budget key and any denial belong to this statement
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

bool ClientSession::actExecute(const protocol::Frame& f, GateVerdict&& v) {
  auto e = protocol::parseExecute(f.body);
  if (!e) return false;  // checked when it arrived
  std::shared_ptr<StatementRun> run;
  bool wrap = false;
  if (Portal* portal = prepared_.portal(std::string(e->portal))) {
    if (!portal->run || portal->run->finished) {
      if (v.plan && v.plan->decision.denied) {
        denyExtended(*v.plan);
        return true;
      }
      if (!writes_ && !txnEndCheck(portal->plan)) return true;
      if (writes_ && portal->write.at_execute) {
        if (!writesBeforeExecute(portal->plan)) return true;
        wrap = portal->write.wrap;
      }
      if (writes_ && portal->plan && portal->plan->analysis &&
          !portal->plan->analysis->statements.empty()) {
        const auto& st = portal->plan->analysis->statements[0];
        if (st.kind == analysis::StatementKind::kTransaction &&
            (st.command == "BEGIN" || st.command == "START TRANSACTION")) {
          hold_.beginSent();
        }
      }
      portal->run = startRun(portal->plan, 0, true);
      portal->run->budget_key = std::move(v.budget_key);
      portal->run->overrides = portal->overrides;
      portal->run->params = portal->params;
    }
    run = portal->run;
  } else {
    // A portal we never saw bound: the server will refuse it; the record says so.
    run = startRun(nullptr, 0, true);
  }
  Pending p(Expect::kExecute);
  p.run = std::move(run);
  if (wrap && server_) {
    // Guarded writes: pgwarden's savepoint first, the write fetched whole (no PortalSuspended
    // while the client's input is held), then Flush, and nothing more from the client until
    // the savepoint is settled.
    const Portal& written = *prepared_.portal(std::string(e->portal));
    writes_->beginWrite(written.write.table);
    sendWriteStep(WriteStep::kSavepoint, WriteTransaction::Savepoint::kSet, true);
    p.execute().write.target = std::make_unique<const Pending::WriteTarget>(
        Pending::WriteTarget{written.write.table, written.write.command});
    describeForMasking(e->portal);
    replies_.push(std::move(p));
    protocol::writeExecute(server_->out(), e->portal, 0);
    protocol::writeFlush(server_->out());
    replies_.batchOpened();
    pause_.move(PauseReason::kWriteStep);
    return true;
  }
  describeForMasking(e->portal);
  replies_.push(std::move(p));
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
    prepared_.closeStatement(name);
  } else if (Portal* portal = prepared_.portal(name)) {
    auto& run = portal->run;
    if (run && !run->finished && !awaitingServer(run)) finishRun(*run, history::Outcome::kOk);
    prepared_.erasePortal(name);
  }
  replies_.push(Pending(Expect::kClose));
  forward(f);
  return true;
}

void ClientSession::queueLocal(std::string bytes, bool with_rfq) {
  if (!replies_.answerLocal(std::move(bytes), with_rfq, server_.txStatus(), client_->out())) return;
  // The answer waits behind the server's answers to earlier extended-protocol messages, which the
  // server holds until a Flush or Sync. PostgreSQL flushes as soon as it reports an error; do the
  // same, or a client that sends Flush after a denial (skipped, as everything up to Sync) waits
  // forever for the ParseComplete and the denial.
  if (replies_.unsynced() && server_) protocol::writeFlush(server_->out());
}

void ClientSession::emitLocalHeads() {
  replies_.emitLocalHeads(server_.txStatus(), client_->out());
}

void ClientSession::popPending() { replies_.popAndEmit(server_.txStatus(), client_->out()); }

// ---------------------------------------------------------------------------------------------
// Statement runs and history
// ---------------------------------------------------------------------------------------------

void ClientSession::finishRun(StatementRun& run, history::Outcome outcome,
                              std::string_view sqlstate, std::string_view message) {
  if (run.finished) return;
  ++statement_count_;
  // An extended-protocol message's run, sent to the server this session holds: history names
  // its host. A simple Query's runs have it from their TextExecution.
  if (run.host.empty() && run.queued > 0 && server_) run.host = server_->pool().hostLabel();
  host_.statementRecorder().finish(run, requestContext(run.extended, run.overrides), caller_.policy,
                                   outcome, sqlstate, message);
}

void ClientSession::denyExtended(const StatementPlan& plan) {
  // The denial answers the extended-protocol message; like after any failed Parse or Bind, the
  // rest of the batch up to Sync is skipped.
  recordDenied(plan, true);
  std::string out;
  writeDeny(out, plan);
  if (writes_) writesDenied(plan, out);
  const bool abort_at_sync = denialAbortsTransaction();
  queueLocal(std::move(out), false);
  replies_.skipToSync(ReplyQueue::SkipCause::kDenied,
                      plan.decision.deny.sqlstate.empty()
                          ? std::string_view("42501")
                          : std::string_view(plan.decision.deny.sqlstate),
                      static_cast<size_t>(config_->limits.max_prepared_statements), abort_at_sync);
}

void ClientSession::skipBatch(std::string_view sqlstate, bool denied) {
  replies_.skipToSync(denied ? ReplyQueue::SkipCause::kDenied : ReplyQueue::SkipCause::kRefused,
                      sqlstate, static_cast<size_t>(config_->limits.max_prepared_statements));
}

void ClientSession::recordSkipped(const std::shared_ptr<const StatementPlan>& plan, size_t index,
                                  bool extended) {
  auto run = startRun(plan, index, extended);
  finishRun(*run, history::Outcome::kError, replies_.skipped().sqlstate(),
            replies_.skipped().message());
}

void ClientSession::noteSkipped(const protocol::Frame& f) {
  switch (f.type) {
    case protocol::fe::kParse: {
      auto m = protocol::parseParse(f.body);
      if (m)
        replies_.skipped().statement(m->statement, {host_.policy().unjudgedPlan(m->sql), false});
      return;
    }
    case protocol::fe::kBind: {
      auto b = protocol::parseBind(f.body);
      if (!b) return;
      auto target = replies_.skipped().findStatement(b->statement);
      if (!target) {
        target = SkippedBatch::Target{prepared_.plan(std::string(b->statement)), false};
      }
      replies_.skipped().portal(b->portal, std::move(*target));
      return;
    }
    case protocol::fe::kExecute: {
      auto e = protocol::parseExecute(f.body);
      if (!e) return;
      auto found = replies_.skipped().execute(e->portal);
      if (!found.found) {
        if (const Portal* portal = prepared_.portal(std::string(e->portal))) found.target.plan = portal->plan;
      }
      // A portal nobody bound would have failed on the server: nothing ran, nothing to record.
      if (found.target.plan && !found.target.recorded) recordSkipped(found.target.plan, 0, true);
      return;
    }
    case protocol::fe::kQuery: {
      // The server ignores a Query in a skipped batch too; each of its statements is accounted for.
      auto body = f.body;
      if (!body.empty() && body.back() == '\0') body.remove_suffix(1);
      const auto plan = host_.policy().unjudgedPlan(body);
      for (size_t i = 0; i < plan->statements.size(); ++i) recordSkipped(plan, i, false);
      return;
    }
    default:
      return;
  }
}

void ClientSession::recordDenied(const StatementPlan& plan, bool extended) {
  statement_count_ += plan.statements.size();
  host_.statementRecorder().denied(plan, requestContext(extended, overrides_), caller_.policy,
                                   overrides_);
}

void ClientSession::finishPortals() {
  prepared_.forEachPortal([&](Portal& p) {
    if (p.run && !p.run->finished) finishRun(*p.run, history::Outcome::kOk);
  });
  prepared_.endPortals();
}

void ClientSession::finishAllPending(history::Outcome outcome, std::string_view message,
                                     std::string_view sqlstate) {
  for (auto& p : replies_) {
    if (p.kind == Expect::kExecute && p.run && !p.run->finished) {
      finishRun(*p.run, outcome, sqlstate, message);
    } else if (p.kind == Expect::kQuery) {
      if (TextExecution* exec = p.query().exec.get()) exec->finishRest(outcome, sqlstate, message);
    }
  }
  replies_.clear();
  const std::unique_ptr<WriteHold::Counted> held = hold_.takeCounted();
  if (held && held->run && !held->run->finished) finishRun(*held->run, outcome, sqlstate, message);
  // Suspended portals belong to the statement the client was reading.
  prepared_.forEachPortal([&](Portal& p) {
    if (p.run && !p.run->finished) finishRun(*p.run, outcome, sqlstate, message);
  });
  prepared_.clearPortals();
}

}  // namespace pgwarden::session
