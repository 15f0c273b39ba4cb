#include "session/statement_execution.h"

#include "pool/server_conn.h"
#include "session/screen_probe.h"

namespace pgwarden::session {

bool StatsWait::over(uint64_t now_ms, bool loaded) {
  if (until_ms_ == 0) return false;
  if (!loaded && now_ms < until_ms_) return false;
  until_ms_ = 0;
  return true;
}

bool countDataRow(StatementRun& run, const protocol::Frame& f, int64_t cap) {
  if (cap >= 0 && run.rows_sent >= cap) {
    run.truncated = true;  // held back: the caller gets `cap` rows
    return false;
  }
  ++run.rows_sent;
  run.bytes_sent += static_cast<int64_t>(f.raw.size());
  if (run.rows_sent == 1) {
    std::optional<std::string_view> first;
    auto row = protocol::parseDataRowFirst(f.body, &first);
    run.single_zero = row && row->columns == 1 && first && isZeroCell(*first);
    run.single_null = row && row->columns == 1 && !first;
  }
  if (run.plan && run.index < run.plan->statements.size()) {
    const auto& checks = run.plan->statements[run.index].checks;
    if (!checks.empty()) {
      if (auto values = protocol::parseDataRowValues(f.body)) {
        guards::checkRow(checks, *values, run.rows_sent, run.assertion_failures);
      }
    }
  }
  return true;
}

bool holdForProbe(StatementRun& run, const guards::PolicyGroup* policy,
                  const analysis::TableStatsSnapshot* stats, ScreenProbe& probe,
                  const std::string& server_db, pool::ServerConnection& server,
                  std::function<void()> resume) {
  if (!probeWanted(run, policy)) return false;
  auto request = screenProbe(run, policy, stats);
  if (!request) return false;
  run.probe = std::make_shared<screens::ProbeAnswer>();
  if (!probe.start(server_db, *request, policy->settings().screen_probe_ms, run.probe,
                   std::move(resume)))
    return false;
  server.holdInput();
  return true;
}

void noteCommandComplete(StatementRun& run, std::string_view tag, size_t bytes) {
  if (tag.rfind("SELECT", 0) != 0 && tag.rfind("FETCH", 0) != 0) {
    // COMMIT/ROLLBACK of a guarded write transaction: the rows it kept or discarded.
    run.rows_affected = run.txn_rows >= 0 ? run.txn_rows : protocol::commandTagCount(tag);
  }
  run.bytes_sent += static_cast<int64_t>(bytes);
}

void TextExecution::begin(std::shared_ptr<const StatementPlan> plan,
                          const guards::AgentOverrides& overrides,
                          std::shared_ptr<const budgets::BudgetKey> budget, bool extended,
                          std::shared_ptr<const ScreenParams> params) {
  judged(std::move(plan), overrides);
  const bool empty_text =
      plan_->analysis && plan_->analysis->ok && plan_->analysis->statements.empty();
  if (empty_text) {
    next_ = plan_->statements.size();
    return;
  }
  run_ = startRun(plan_, 0, extended);
  run_->budget_key = std::move(budget);
  run_->overrides = overrides_;
  run_->params = std::move(params);
  next_ = 1;
}

void TextExecution::judged(std::shared_ptr<const StatementPlan> plan,
                           const guards::AgentOverrides& overrides) {
  plan_ = std::move(plan);
  overrides_ = overrides;
  run_.reset();
  next_ = plan_ ? plan_->statements.size() : 0;  // nothing of it runs
}

void TextExecution::next() {
  run_.reset();
  if (plan_ && next_ < plan_->statements.size()) {
    run_ = startRun(plan_, next_++, false);
    run_->overrides = overrides_;
    run_->host = host_;
  }
}

void TextExecution::finish(history::Outcome outcome, std::string_view sqlstate,
                           std::string_view message) {
  if (run_ && !run_->finished) sink_.finishRun(*run_, outcome, sqlstate, message);
  next();
}

std::shared_ptr<StatementRun> TextExecution::detach() {
  std::shared_ptr<StatementRun> run = std::move(run_);
  next();
  return run;
}

void TextExecution::error(std::string_view sqlstate, std::string_view message, size_t bytes) {
  if (run_ && !run_->finished) {
    run_->bytes_sent += static_cast<int64_t>(bytes);
    sink_.finishRun(*run_, outcomeForError(sqlstate), sqlstate, message);
  }
  run_.reset();
  finishRest(history::Outcome::kError, sqlstate, kNotExecutedInQuery);
}

void TextExecution::finishRest(history::Outcome outcome, std::string_view sqlstate,
                               std::string_view message) {
  if (run_ && !run_->finished) sink_.finishRun(*run_, outcome, sqlstate, message);
  run_.reset();
  finishNotExecuted(plan_, next_, overrides_, [&](StatementRun& run) {
    run.host = host_;
    sink_.finishRun(run, outcome, sqlstate, message);
  });
}

}  // namespace pgwarden::session
