// Client session, agent side: the agent context, webhook pauses and budgets, the statement gate
// (judging a Query, Parse, Bind or Execute and acting on its verdict) and the cost gate's EXPLAIN
// on the session's own server connection.

#include "session/client_session.h"

#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "guards/codes.h"
#include "session/client_session_util.h"

namespace pgwarden::session {

namespace {
// Fails the server's transaction block in place of a denied statement; pgwarden takes its error.
constexpr std::string_view kAbortSql =
    "DO $pgwarden$BEGIN RAISE EXCEPTION 'pgwarden refused a statement of this transaction "
    "block'; END$pgwarden$";
}  // namespace

// PostgreSQL aborts a transaction block on any error, a refused write included: later
// statements get 25P02 and COMMIT answers ROLLBACK. A denial does the same to the block the
// client had open at its last ReadyForQuery (a BEGIN in the denied batch itself is not seen).
// guarded_writes keeps its documented rule instead: a denied statement leaves the transaction
// open, and the TRANSACTION_OPEN notice says so (docs/writes.md).
bool ClientSession::denialAbortsTransaction() const {
  return !writes_ && server_ && server_.txStatus() == 'T';
}

// Sent behind whatever the server still owes: for a simple Query at once; for an extended batch
// at its Sync, after a Sync of pgwarden's own (the server may be skipping to a Sync after an
// error of its own, and would skip the statement too). The answers to both are pgwarden's;
// the ReadyForQuery it takes leaves the transaction status 'E' for the client's.
void ClientSession::sendTransactionAbort(bool sync_first) {
  if (sync_first) {
    Pending sync(Expect::kInternal);
    sync.internal().abort_txn = true;
    sync.internal().sync = true;
    replies_.push(std::move(sync));
    protocol::writeSync(server_->out());
    replies_.batchClosed();
  }
  Pending abort(Expect::kInternal);
  abort.internal().abort_txn = true;
  replies_.push(std::move(abort));
  protocol::writeQuery(server_->out(), kAbortSql);
}

using session_detail::awaitingServer;

namespace {

using history::wallClockMicros;

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Agent context, webhook pauses and budgets
// ---------------------------------------------------------------------------------------------

guards::RequestContext ClientSession::requestContext(bool extended, const guards::AgentOverrides& ov) const {
  guards::RequestContext ctx;
  ctx.user = caller_.user;
  ctx.database = caller_.database;
  ctx.group = caller_.group;
  // A sqlcommenter comment on the statement wins over SET and the startup values, for it alone.
  ctx.agent_id = ov.agent_id ? std::string_view(*ov.agent_id) : std::string_view(caller_.agentId());
  ctx.conversation_id = ov.conversation_id ? std::string_view(*ov.conversation_id)
                                           : std::string_view(caller_.conversationId());
  ctx.query_intent = ov.query_intent ? std::string_view(*ov.query_intent)
                                     : std::string_view(caller_.queryIntent());
  ctx.application_name = caller_.application_name;
  ctx.client_addr = client_.peerHost();
  ctx.extended = extended;
  ctx.session_id = id_;
  ctx.budgets = host_.budgets();
  ctx.observer = host_.guardObserver();
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
  const std::string name = std::string("pgwarden.") + guards::agentKeyName(cmd.key);
  const int64_t started_us = wallClockMicros();
  switch (cmd.kind) {
    case Kind::kSet:
      caller_.setAgentSetting(cmd.key, cmd.value);
      spdlog::info("{}: {} set by the client", logPrefix(), name);
      protocol::writeCommandComplete(out, "SET");
      break;
    case Kind::kReset:
      caller_.resetAgentSetting(cmd.key);
      protocol::writeCommandComplete(out, "RESET");
      break;
    case Kind::kShow:
      if (describe) writeTextColumn(out, name, format);
      // A text value's binary form is its bytes, so either format code gets the same cells.
      protocol::writeDataRow(out, {std::optional<std::string_view>(caller_.agentSetting(cmd.key))});
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
  run.plan = host_.policy().localPlan(
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
  } else if (!name.empty() && (prepared_.hasStatement(name) || prepared_.agentStatement(name))) {
    sqlstate = "42P05";
    error = "prepared statement \"" + name + "\" already exists";
  } else if (prepared_.agentStatementsFull(name)) {
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
  // The unnamed statement is ours now; Bind "" must not find the server's old one here.
  prepared_.addAgentStatement(name, cmd);
  protocol::writeParseComplete(out);
  queueLocal(std::move(out), false);
  return true;
}

bool ClientSession::handleAgentMessage(const protocol::Frame& f) {
  std::string out;
  switch (f.type) {
    case protocol::fe::kBind: {
      auto b = protocol::parseBind(f.body);
      if (!b) return false;  // the usual path reports the malformed message
      const std::string portal(b->portal);
      const guards::AgentCommand* st = prepared_.agentStatement(std::string(b->statement));
      if (!st) {
        prepared_.eraseAgentPortal(portal);  // a server statement bound to this name replaces ours
        return false;
      }
      const int16_t format = b->result_formats.empty() ? 0 : b->result_formats[0];
      std::string_view code;
      if (!portal.empty() && (prepared_.hasPortal(portal) || prepared_.hasAgentPortal(portal))) {
        code = "42P03";
        protocol::writeError(out, "ERROR", code, "portal \"" + portal + "\" already exists");
      } else if (format != 0 && format != 1) {
        code = "22023";
        protocol::writeError(out, "ERROR", code, "unsupported format code: " + std::to_string(format));
      } else if (prepared_.agentPortalsFull()) {
        code = "54000";
        protocol::writeError(out, "ERROR", code, "too many open portals in this session; close the ones you no longer need");
      }
      if (!code.empty()) {
        queueLocal(std::move(out), false);
        skipBatch(code, false);
        return true;
      }
      if (Portal* old = prepared_.portal(portal)) {
        // Binding the unnamed portal again replaces the server's one.
        auto& run = old->run;
        if (run && !run->finished && !awaitingServer(run)) finishRun(*run, history::Outcome::kOk);
        prepared_.erasePortal(portal);
      }
      prepared_.addAgentPortal(portal, AgentPortal{*st, format});
      protocol::writeBindComplete(out);
      break;
    }
    case protocol::fe::kDescribe: {
      auto d = protocol::parseDescribe(f.body);
      if (!d) return false;
      const std::string name(d->name);
      const guards::AgentCommand* cmd = nullptr;
      int16_t format = 0;
      if (d->kind == 'S') {
        cmd = prepared_.agentStatement(name);
        if (!cmd) return false;
        protocol::writeParameterDescription(out, {});
      } else {
        const AgentPortal* p = prepared_.agentPortal(name);
        if (!p) return false;
        cmd = &p->cmd;
        format = p->format;
      }
      if (cmd->kind == guards::AgentCommand::Kind::kShow) {
        writeTextColumn(out, std::string("pgwarden.") + guards::agentKeyName(cmd->key), format);
      } else {
        protocol::writeNoData(out);
      }
      break;
    }
    case protocol::fe::kExecute: {
      auto e = protocol::parseExecute(f.body);
      if (!e) return false;
      const AgentPortal* p = prepared_.agentPortal(std::string(e->portal));
      if (!p) return false;
      applyAgentCommand(p->cmd, false, p->format, out);
      break;
    }
    case protocol::fe::kClose: {
      auto c = protocol::parseClose(f.body);
      if (!c) return false;
      const std::string name(c->name);
      if (!(c->kind == 'S' ? prepared_.eraseAgentStatement(name) : prepared_.eraseAgentPortal(name))) return false;
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

bool ClientSession::judge(const protocol::Frame& f, GateRequest&& request) {
  GateVerdict v;
  if (!gate().decide(std::move(request), v)) {
    // Waiting for a webhook, the cost gate's EXPLAIN or the budget store: the message is kept
    // (and nothing after it is read) until the verdict comes; then it goes on from here.
    pause_.keep(f.raw);
    return true;
  }
  return act(f, std::move(v));
}

bool ClientSession::act(const protocol::Frame& f, GateVerdict&& v) {
  overrides_ = v.overrides;
  switch (f.type) {
    case protocol::fe::kQuery:
      return actQuery(f, std::move(v));
    case protocol::fe::kParse:
      return actParse(f, std::move(v));
    case protocol::fe::kBind:
      return actBind(f, std::move(v));
    case protocol::fe::kExecute:
      return actExecute(f, std::move(v));
    default: break;
  }
  gate_->discard(v);
  return true;
}

void ClientSession::onGateVerdict(GateVerdict v) {
  // A verdict that runs the statement needs a server connection; a denial or the EXPLAIN's
  // error is answered here without one.
  const bool runs = v.plan && !v.plan->decision.denied && v.explain_error.empty();
  if (runs && !replies_.skipping() && !retakeServer()) {
    pause_.holdVerdict(std::move(v));  // onServerReady goes on with it
    return;
  }
  actOnVerdict(std::move(v));
}

bool ClientSession::retakeServer() {
  if (server_ || !server_.transactionPooled() || state_ != ClientState::kReady) return true;
  return takeServer();
}

void ClientSession::actOnVerdict(GateVerdict v) {
  const std::string raw = pause_.takeMessage();
  if (state_ != ClientState::kReady || raw.size() < 5) {
    gate_->discard(v);
    return;
  }
  const protocol::Frame f{raw[0], raw, std::string_view(raw).substr(5)};
  if (replies_.skipping()) {
    // An earlier message of the batch failed meanwhile: this one is skipped with the rest, up
    // to Sync, as the server skips them.
    gate_->discard(v);
    handleClientMessage(f);
  } else {
    act(f, std::move(v));
  }
  resumeInput();
}

bool ClientSession::txnEndCheck(const std::shared_ptr<const StatementPlan>& plan) {
  // As in a text (the read_only guard's checkText): after COMMIT or ROLLBACK, the rest of an
  // unsynced batch would run in a new transaction whose read-only mode the server reports only
  // at the Sync.
  const analysis::StatementInfo* st = plan && plan->analysis && !plan->analysis->statements.empty()
                                          ? &plan->analysis->statements[0]
                                          : nullptr;
  if (replies_.txnEndInBatch() && st && caller_.policy) {
    guards::GuardResult r;
    r.action = guards::Action::kDeny;
    r.code = std::string(guards::codes::kReadOnly);
    r.message =
        "This Execute follows a COMMIT or ROLLBACK in the same batch; a new transaction would "
        "begin before the server could report its settings. Send Sync after the transaction's "
        "end, then this statement.";
    r.facts.add("statement", st->command).add("next_step", "send Sync after COMMIT or ROLLBACK");
    guards::Decision d = plan->decision;
    guards::applyDenial(d, caller_.policy->renderOutside("read_only", std::move(r)));
    denyExtended(*PolicyEngine::withDecision(*plan, std::move(d)));
    return false;
  }
  if (st && st->kind == analysis::StatementKind::kTransaction &&
      (st->command == "COMMIT" || st->command == "ROLLBACK")) {
    replies_.txnEndSent();
  }
  return true;
}

void ClientSession::resumeInput() {
  if (state_ != ClientState::kReady) return;
  if (!client_.clientPaused() && !client_->reading() && client_->startRead() != 0) {
    closeSession("cannot read from the client");
    return;
  }
  processInput();
}

void ClientSession::cancelWaits() {
  std::optional<GateVerdict> held = pause_.dropMessage();
  if (gate_) {
    if (held) gate_->discard(*held);
    gate_->cancel();
  }
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
  replies_.skipToSync(ReplyQueue::SkipCause::kServerError, sqlstate,
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
  if (!server_ && server_.transactionPooled() && state_ == ClientState::kReady &&
      pause_.holdsMessage()) {
    // The connection went back to the pool while a webhook answered: the EXPLAIN runs on the
    // next one the pool lends (onServerReady), and the gate waits for it as for any EXPLAIN.
    if (!retakeServer()) {
      pause_.deferExplain({text, extended, args});
      return true;
    }
  }
  if (!server_) return false;
  sendExplain(text, extended, args);
  return true;
}

bool ClientSession::runParseCheck(const std::string& text, bool extended,
                                  const std::vector<uint32_t>& param_types) {
  if (!server_ || state_ != ClientState::kReady) return false;
  // A Query inside an unfinished extended batch: the check's Sync would end the client's batch.
  if (!extended && replies_.unsyncedTail()) return false;
  // A guarded_writes transaction keeps its rule that a refused statement leaves it open
  // (docs/writes.md): the server is asked only while no transaction is open.
  if (writes_ && (server_.txStatus() != 'I' || !replies_.empty() || replies_.unsyncedTail()))
    return false;
  Pending p(Expect::kExplain);
  Pending::Explain& x = p.explain();
  x.parse_check = true;
  std::string& out = server_->out();
  protocol::writeParse(out, kParseCheckName, text, param_types);
  protocol::writeClose(out, 'S', kParseCheckName);
  if (extended) {
    // A Flush: after an error the server skips to the client's own Sync, as after the client's
    // Parse; after a success the client's batch goes on undisturbed.
    protocol::writeFlush(out);
    x.closes = 1;
    replies_.batchOpened();
  } else {
    // A Sync: the ReadyForQuery after it carries the status the client's Query would have left.
    protocol::writeSync(out);
    x.simple = true;
  }
  replies_.push(std::move(p));
  flushServer();
  return true;
}

void ClientSession::answerGate(bool parse_check, std::string error, std::string json) {
  if (parse_check) {
    gate_->parseChecked(std::move(error));
  } else if (!error.empty()) {
    gate_->explainFailed(std::move(error));
  } else {
    gate_->explainDone(std::move(json));
  }
}

void ClientSession::sendExplain(const std::string& text, bool extended, const ExplainArgs& args) {
  Pending p(Expect::kExplain);
  std::string& out = server_->out();
  if (!extended) {
    p.explain().simple = true;
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
    p.explain().closes = 2;
    replies_.batchOpened();
  }
  replies_.push(std::move(p));
  flushServer();
}

bool ClientSession::handleExplainMessage(const protocol::Frame& f, Pending& head) {
  Pending::Explain& x = head.explain();
  switch (f.type) {
    case protocol::be::kDataRow:
      if (x.json.empty()) {
        auto cells = protocol::parseDataRowValues(f.body);
        if (cells && !cells->empty() && (*cells)[0]) x.json.assign(*(*cells)[0]);
      }
      return true;
    case protocol::be::kErrorResponse:
      x.error.assign(f.raw.data(), f.raw.size());
      if (!x.simple) {
        std::string error = std::move(x.error);
        const bool parse_check = x.parse_check;
        replies_.pop();
        answerGate(parse_check, std::move(error), {});
      }
      return true;
    case protocol::be::kCloseComplete:
      if (!x.simple && --x.closes == 0) {
        std::string json = std::move(x.json);
        const bool parse_check = x.parse_check;
        replies_.pop();
        answerGate(parse_check, {}, std::move(json));
      }
      return true;
    case protocol::be::kReadyForQuery:
      if (x.simple) {
        auto z = protocol::parseReadyForQuery(f.body);
        if (z) server_.readyForQuery(z->status);
        std::string json = std::move(x.json);
        std::string error = std::move(x.error);
        const bool parse_check = x.parse_check;
        replies_.pop();
        answerGate(parse_check, std::move(error), std::move(json));
        return true;
      }
      break;
    case protocol::be::kRowDescription:
    case protocol::be::kCommandComplete:
    case protocol::be::kParseComplete:
    case protocol::be::kBindComplete:
      return true;
    default:
      break;
  }
  spdlog::error(
      "{}: unexpected message '{}' from the server during the gate's EXPLAIN or parse check",
      logPrefix(), logsafe(f.type));
  terminate("08P01", "protocol error between pgwarden and the database; reconnect");
  return false;
}

}  // namespace pgwarden::session
