// The statement runner's guarded-write transaction steps: begin, the savepoint around each write,
// the count a write is held for, commit and rollback, sent on the transaction's own connection
// and read back from its replies (docs/writes.md).
#include <spdlog/spdlog.h>

#include "mcp/statement_runner.h"
#include "protocol/messages.h"
#include "session/statement_execution.h"

namespace pgwarden::mcp {

using history::Outcome;
using session::StatementRun;

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

bool StatementRunner::txnCommandComplete(std::string_view tag) {
  result_.last_tag = std::string(tag.substr(0, tag.find(' ')));
  session::StatementRun* run = exec_.run();
  const auto& plan = exec_.plan();
  const analysis::StatementInfo* st = nullptr;
  if (run && plan && plan->analysis && run->index < plan->analysis->statements.size()) {
    st = &plan->analysis->statements[run->index];
  }
  using Wrapped = session::WriteTransaction::Wrapped;
  auto done = spec_.txn->transaction().onCommandComplete(
      st, tag,
      write_.wrap ? std::optional<Wrapped>(Wrapped{write_.table, write_.command}) : std::nullopt);
  if (run && done.txn_rows >= 0) run->txn_rows = done.txn_rows;  // history: what COMMIT kept
  counting_ = done.measure;  // the rows of every table it changed are counted at ReadyForQuery
  if (!done.over) return true;
  // Over a cap: the write is answered with TOO_MANY_ROWS and undone at its ReadyForQuery; the
  // rows it returned (RETURNING) are gone with it.
  result_.undone = spec_.txn->undone(std::move(*done.over));
  result_.sets.clear();
  if (run && !run->finished) run->rows_affected = done.rows;
  exec_.finish(Outcome::kError, result_.undone->sqlstate, result_.undone->message);
  return false;
}

void StatementRunner::txnCounted(char status) {
  counting_ = false;
  std::shared_ptr<session::StatementRun> run = std::move(counting_run_);
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
    if (run) finishRun(*run, Outcome::kOk, {}, {});
  }
  sendSettle();
}

void StatementRunner::sendSettle() {
  // RELEASE keeps the write; ROLLBACK TO undoes it (over a cap).
  using Savepoint = session::WriteTransaction::Savepoint;
  sendTxnStep(TxnStep::kSettle,
              spec_.txn->transaction().savepointQuery(result_.undone ? Savepoint::kUndo : Savepoint::kRelease));
}

}  // namespace pgwarden::mcp
