// Client session, guarded writes (docs/writes.md): the wire side of the WriteTransaction state
// machine. A write the gate lets through runs between pgwarden's SAVEPOINT and its RELEASE (or
// ROLLBACK TO, when it changed more rows than the group allows), with the client's input held
// until the savepoint is settled, so nothing the client sends can land in between. After each
// statement inside a transaction the client gets a TRANSACTION_OPEN notice; an idle or old
// transaction is rolled back here, and a session that ends mid-transaction is rolled back by the
// connection's reset (never committed). Over the extended protocol the steps go inside the batch
// as Parse/Bind/Execute of pgwarden's own, and each Execute of a write is judged when it runs.

#include <spdlog/spdlog.h>

#include "common/log_text.h"
#include "guards/codes.h"
#include "session/client_session.h"

namespace pgwarden::session {

namespace {

void writeNoticeVerdict(std::string& out, const guards::Verdict& v) {
  protocol::writeNotice(out, "NOTICE", v.sqlstate, v.message, v.detail, v.hint);
}

}  // namespace

void ClientSession::writesSetUp() {
  if (caller_.policy && caller_.policy->writes().guarded)
    writes_ = std::make_unique<WriteTransaction>(caller_.policy->writes());
}

void ClientSession::sendWriteStep(WriteStep step, std::string_view sql) {
  Pending p(Expect::kInternal);
  p.internal().write_step = step;
  protocol::writeQuery(server_->out(), sql);
  replies_.push(std::move(p));
}

namespace {
// Statement and portal name of pgwarden's own write steps inside an extended-protocol batch.
constexpr std::string_view kWriteStepName = "pgwarden_write_step";
}  // namespace

void ClientSession::sendWriteStep(WriteStep step, WriteTransaction::Savepoint sp, bool extended) {
  if (extended) {
    sendExtendedWriteStep(step, writes_->savepointStatements(sp));
  } else {
    sendWriteStep(step, writes_->savepointQuery(sp));
  }
}

void ClientSession::sendExtendedWriteStep(WriteStep step, const std::vector<std::string>& sqls) {
  Pending p(Expect::kInternal);
  Pending::Internal& internal = p.internal();
  internal.write_step = step;
  std::string& out = server_->out();
  for (const std::string& sql : sqls) {
    protocol::writeParse(out, kWriteStepName, sql, {});
    protocol::BindMsg b;
    b.portal = kWriteStepName;
    b.statement = kWriteStepName;
    protocol::writeBind(out, b);
    protocol::writeExecute(out, kWriteStepName, 0);
    protocol::writeClose(out, 'P', kWriteStepName);
    protocol::writeClose(out, 'S', kWriteStepName);
    internal.step_closes += 2;
  }
  protocol::writeFlush(out);
  replies_.batchOpened();
  replies_.push(std::move(p));
  flushServer();
}

bool ClientSession::writesBeforeExecute(const std::shared_ptr<const StatementPlan>& plan) {
  if (!plan || !plan->analysis || plan->analysis->statements.empty()) return true;
  auto deny = writes_->judgeExecute(plan->analysis->statements[0], hold_.beginUnanswered());
  if (!deny) return true;
  guards::Decision d = plan->decision;
  guards::applyDenial(d, caller_.policy->renderOutside("guarded_writes", std::move(*deny)));
  denyExtended(*PolicyEngine::withDecision(*plan, std::move(d)));
  return false;
}

bool ClientSession::handleExtendedWriteStep(const protocol::Frame& f, Pending& head) {
  if (f.type == protocol::be::kErrorResponse) {
    // The server refused pgwarden's own step (the transaction had failed, say): it now skips
    // everything up to the client's Sync, the client's write too, which hears this error.
    auto e = protocol::parseErrorFields(f.body);
    const std::string sqlstate = e ? std::string(e->sqlstate()) : std::string();
    const std::string message = e ? std::string(e->message()) : std::string();
    spdlog::warn("{}: pgwarden's write step {} failed: {}", logPrefix(),
                 static_cast<int>(head.writeStep()),
                 logsafe(message, kLogMessageMaxBytes));
    replies_.pop();
    if (hold_.counted()) writesCounted(true, false);  // the count failed: the write fails with it
    client_->out().append(f.raw.data(), f.raw.size());
    pause_.endWriteStep();
    afterServerError(sqlstate, message);
    return true;
  }
  // ParseComplete, BindComplete, ... until the last CloseComplete.
  if (f.type == protocol::be::kDataRow) {
    writes_->noteCounterRow(f.body);  // the counters read with the savepoint or after the write
    return true;
  }
  if (f.type != protocol::be::kCloseComplete || --head.internal().step_closes > 0) return true;
  const WriteStep step = head.writeStep();
  replies_.pop();
  if (step == WriteStep::kCount) writesCounted(true, true);
  if (step == WriteStep::kRelease || step == WriteStep::kUndo) {
    pause_.endWriteStep();
  }
  emitLocalHeads();
  return true;
}

void ClientSession::writesBeforeQuery(Pending& p, const GateVerdict& v, std::string query) {
  // The savepoint goes first, with the counters the write's count starts from; the client's
  // Query follows it once the savepoint succeeded (a write outside pgwarden's savepoint would run
  // past the row caps), and nothing else is read from the client until RELEASE or ROLLBACK TO
  // has answered.
  writes_->beginWrite(v.write.table);
  sendWriteStep(WriteStep::kSavepoint, WriteTransaction::Savepoint::kSet, false);
  p.query().write.target = std::make_unique<const Pending::WriteTarget>(
      Pending::WriteTarget{v.write.table, v.write.command});
  hold_.holdQuery(std::move(query));
  pause_.move(PauseReason::kWriteStep);
}

bool ClientSession::waitForTxnState(const protocol::Frame& f) {
  if (replies_.empty() || !server_) return false;
  if (f.type == protocol::fe::kExecute) {
    // Only an Execute of a write is judged by the transaction's state (and what it looked at).
    auto e = protocol::parseExecute(f.body);
    if (!e) return false;  // refused as malformed when it is handled
    const Portal* portal = prepared_.portal(std::string(e->portal));
    if (!portal || !(portal->write.at_execute || portal->write.wrap)) return false;
  } else if (f.type != protocol::fe::kQuery) {
    return false;
  }
  pause_.move(PauseReason::kTxnState);
  if (replies_.unsynced() && !pause_.flushSent()) {
    // The server keeps its answers to an unsynced batch until a Flush or Sync.
    protocol::writeFlush(server_->out());
    pause_.setFlushSent();
  }
  return true;
}

void ClientSession::writeAfterSavepoint(const protocol::ReadyForQueryMsg& z, bool failed) {
  std::string query = hold_.takeQuery();
  if (!failed && z.status == 'T' && !replies_.empty() && replies_.front().kind == Expect::kQuery) {
    server_->out().append(query);
    flushServer();
    return;
  }
  // The savepoint did not take: the write is never sent. The client hears why, the statement is
  // recorded as refused, and the transaction goes on in the state the server reported.
  std::string sqlstate = "25P01";
  std::string detail = "the server refused pgwarden's savepoint";
  if (auto refusal = hold_.takeSavepointRefusal()) {
    sqlstate = std::move(refusal->first);
    detail += ": " + refusal->second;
  } else if (z.status != 'T') {
    detail = "no transaction was open when the write was to run";
  }
  spdlog::warn("{}: a guarded write was not sent: {}", logPrefix(),
               logsafe(detail, kLogMessageMaxBytes));
  pause_.endWriteStep();
  if (replies_.empty() || replies_.front().kind != Expect::kQuery) {
    writesAfterStatement(z.status);
    protocol::writeReadyForQuery(client_->out(), z.status);
    return;
  }
  Pending& head = replies_.front();
  const std::string message =
      "pgwarden did not run this write: it runs each write inside its own savepoint, and " + detail;
  // The write never ran, nor anything after it in its text.
  if (head.query().exec) head.query().exec->finishRest(history::Outcome::kError, sqlstate, message);
  std::string out;
  protocol::writeError(
      out, "ERROR", sqlstate, message, "",
      "Run the write inside an open transaction: BEGIN, look at the rows, then the write.");
  writesAfterStatement(z.status);
  head.answerHere(std::move(out));
  head.local().rfq = true;
  emitLocalHeads();
}

bool ClientSession::writesCommandComplete(const protocol::Frame& f, Pending& head) {
  auto cc = protocol::parseCommandComplete(f.body);
  const std::string_view tag = cc ? cc->tag : std::string_view();
  const auto sp = tag.find(' ');
  hold_.noteTag(tag.substr(0, sp));
  StatementRun* run = head.current();
  const analysis::StatementInfo* st = nullptr;
  if (run && run->plan && run->plan->analysis && run->index < run->plan->analysis->statements.size()) {
    st = &run->plan->analysis->statements[run->index];
  }
  Pending::Write* write = head.write();
  const Pending::WriteTarget* target = write ? write->target.get() : nullptr;
  const bool wrapped = target != nullptr;
  auto done = writes_->onCommandComplete(
      st, tag,
      wrapped ? std::optional<WriteTransaction::Wrapped>({target->table, target->command})
              : std::nullopt);
  if (run && done.txn_rows >= 0) run->txn_rows = done.txn_rows;  // history: what COMMIT kept
  if (done.measure) {
    // Within the caps by its tag: the client hears CommandComplete once the counters say what
    // else the write changed (writesCounted). A Query's count is read at its ReadyForQuery.
    hold_.holdCounted(WriteHold::Counted{head.currentShared(), head.rows_this_execute,
                                         lastOfText(head), std::string(f.raw)});
    if (head.kind != Expect::kQuery) sendExtendedWriteStep(WriteStep::kCount, {writes_->countersQuery()});
    return true;
  }
  if (!done.over) {
    if (done.counted) host_.counters().rows_written += static_cast<uint64_t>(done.rows);
    if (wrapped && head.kind == Expect::kExecute) {
      sendWriteStep(WriteStep::kRelease, WriteTransaction::Savepoint::kRelease, true);
    }
    return false;
  }
  // Over the cap: the client hears TOO_MANY_ROWS instead of the command tag, and the statement's
  // changes are undone at its ReadyForQuery (ROLLBACK TO the savepoint).
  if (write) write->undo = true;
  const guards::Verdict v = caller_.policy->renderOutside("guarded_writes", std::move(*done.over));
  writeDeny(client_->out(), v);
  ++host_.counters().writes_undone;
  if (run) {
    run->rows_affected = done.rows;
    finishRun(*run, history::Outcome::kError, v.sqlstate, v.message);
  }
  if (head.kind == Expect::kExecute) {
    sendWriteStep(WriteStep::kUndo, WriteTransaction::Savepoint::kUndo, true);
    // As after any error in a batch: the client's messages up to its Sync are skipped.
    skipBatch(v.sqlstate, true);
  }
  return true;
}

bool ClientSession::writesReadyForQuery(char status, Pending& head) {
  const Pending::Write* write = head.kind == Expect::kQuery ? &head.query().write : nullptr;
  if (write && write->target) {
    pause_.endWriteStep();
    if (!write->failed && status == 'T' && server_) {
      // Settle the savepoint before the client hears ReadyForQuery (it comes with the step's).
      const bool undo = write->undo;
      popPending();
      if (hold_.counted()) {
        sendWriteStep(WriteStep::kCount, writes_->countersQuery());
      } else if (undo) {
        sendWriteStep(WriteStep::kUndo, WriteTransaction::Savepoint::kUndo, false);
      } else {
        sendWriteStep(WriteStep::kRelease, WriteTransaction::Savepoint::kRelease, false);
      }
      pause_.move(PauseReason::kWriteStep);
      flushServer();
      return true;
    }
  }
  if (hold_.counted()) writesCounted(false, false);  // not inside its transaction any more
  writesAfterStatement(status);
  return false;
}

bool ClientSession::handleWriteStep(const protocol::Frame& f, Pending& head) {
  if (head.internal().step_closes > 0) return handleExtendedWriteStep(f, head);
  const WriteStep step = head.writeStep();
  if (f.type == protocol::be::kErrorResponse) {
    auto e = protocol::parseErrorFields(f.body);
    spdlog::warn("{}: pgwarden's write step {} failed: {}", logPrefix(), static_cast<int>(step),
                 logsafe(e ? e->message() : std::string_view("?"), kLogMessageMaxBytes));
    head.internal().failed = true;
    if (step == WriteStep::kSavepoint && e) {
      hold_.savepointRefused(e->sqlstate(), e->message());
    }
    if (step == WriteStep::kCount && hold_.counted()) {
      // The count failed (the transaction with it): the write fails with the server's words.
      writesCounted(false, false);
      client_->out().append(f.raw.data(), f.raw.size());
    }
    return true;
  }
  if (f.type == protocol::be::kDataRow) {
    writes_->noteCounterRow(f.body);  // the counters read with the savepoint or after the write
    return true;
  }
  if (f.type != protocol::be::kReadyForQuery)
    return true;  // CommandComplete of pgwarden's own statement
  const auto z = takeReadyForQuery(f);
  if (!z) return false;
  const bool failed = head.internal().failed;
  replies_.pop();
  switch (step) {
    case WriteStep::kSavepoint:
      writeAfterSavepoint(*z, failed);
      return true;
    case WriteStep::kCount:
      if (z->status == 'T' && hold_.counted()) {
        writesCounted(false, true);  // RELEASE or ROLLBACK TO next; the client waits for it
        flushServer();
        break;
      }
      writesAfterStatement(z->status);
      protocol::writeReadyForQuery(client_->out(), z->status);
      pause_.endWriteStep();
      break;
    case WriteStep::kRelease:
    case WriteStep::kUndo:
      // The client's write is settled: the notice and its ReadyForQuery now.
      writesAfterStatement(z->status);
      protocol::writeReadyForQuery(client_->out(), z->status);
      pause_.endWriteStep();
      break;
    case WriteStep::kExpire:
      (void)writes_->move(TxnEvent::kServerIdle, host_.nowMs());
      break;
    case WriteStep::kNone:
      break;
  }
  emitLocalHeads();
  return true;
}

void ClientSession::writesCounted(bool extended, bool counted) {
  const std::unique_ptr<WriteHold::Counted> held = hold_.takeCounted();
  StatementRun* run = held->run.get();
  if (!counted) {
    // The client hears the count's error instead; the statement ends with it.
    if (run)
      finishRun(*run, history::Outcome::kError, "25P02",
                "pgwarden could not count the rows it changed");
    return;
  }
  const auto done = writes_->onCounted();
  if (!done.over) {
    host_.counters().rows_written += static_cast<uint64_t>(done.rows);
    const std::string_view raw = held->command_complete;
    sendCommandComplete(protocol::Frame{'C', raw, raw.substr(5)}, run, held->rows, held->last);
    sendWriteStep(WriteStep::kRelease, WriteTransaction::Savepoint::kRelease, extended);
    return;
  }
  const guards::Verdict v = caller_.policy->renderOutside("guarded_writes", *done.over);
  writeDeny(client_->out(), v);
  ++host_.counters().writes_undone;
  if (run) {
    run->rows_affected = done.rows;
    finishRun(*run, history::Outcome::kError, v.sqlstate, v.message);
  }
  sendWriteStep(WriteStep::kUndo, WriteTransaction::Savepoint::kUndo, extended);
  if (extended) skipBatch(v.sqlstate, true);
}

void ClientSession::writesAfterStatement(char status) {
  hold_.statementAnswered();  // a BEGIN in the batch has been answered by now
  const TxnState before = writes_->state();
  const auto end = writes_->afterStatement(status, hold_.lastTag(), host_.nowMs());
  if (!end.moved) {
    spdlog::warn("{}: write mode: no move from {} on ReadyForQuery '{}'", logPrefix(),
                 txnStateName(before), logsafe(status));
    return;
  }
  if (end.notice) writeNoticeVerdict(client_->out(), *end.notice);
  if (end.ended) {
    auto& c = host_.counters();
    ++(*end.ended == TxnEnd::kCommitted
           ? c.write_txn_committed
           : c.write_txn_rolled_back[static_cast<size_t>(TxnEnd::kRolledBack)]);
  }
}

void ClientSession::writesDenied(const StatementPlan& plan, std::string& out) {
  // The denied statement never ran: the transaction is as it was, and the agent hears so.
  if (auto n = writes_->afterDenial(plan.decision.deny.code, host_.nowMs())) {
    writeNoticeVerdict(out, *n);
  }
}

void ClientSession::writesTick(uint64_t now_ms) {
  if (!server_ || !replies_.empty() || pause_.holdsMessage() ||
      pause_.reason() == PauseReason::kWriteStep)
    return;
  const auto why = writes_->due(now_ms);
  if (!why) return;
  const WriteTransaction::Totals lost = writes_->totals();
  if (!writes_->move(TxnEvent::kExpired, now_ms)) return;
  spdlog::info("{}: rolling back a write transaction ({}): lost {}", logPrefix(), txnEndName(*why),
               logsafe(lost.summary, kLogMessageMaxBytes));
  ++host_.counters().write_txn_rolled_back[static_cast<size_t>(writes_->expiredBy())];
  writes_->clear();
  sendWriteStep(WriteStep::kExpire, "ROLLBACK");
  flushServer();
}

void ClientSession::writesSessionEnd() {
  const TxnState s = writes_->state();
  if (s != TxnState::kOpen && s != TxnState::kFailed) return;
  // The connection's reset sends ROLLBACK before it is lent again (ServerConnection::release).
  spdlog::info("{}: client left mid-transaction; rolled back, lost {}", logPrefix(),
               logsafe(writes_->totals().summary, kLogMessageMaxBytes));
  ++host_.counters().write_txn_rolled_back[static_cast<size_t>(TxnEnd::kDisconnect)];
  writes_->clear();
}

}  // namespace pgwarden::session
