#include "session/statement_recorder.h"

#include "common/recycling_allocator.h"

namespace pgwarden::session {

namespace {

// `message` with every double-quoted part replaced by "...", written into `out`: what the server
// quotes is what the caller typed, or a name.
void keepWithoutQuotedParts(std::string_view message, std::string& out) {
  out.clear();
  out.reserve(message.size());
  bool quoted = false;
  for (const char c : message) {
    if (c == '"') {
      if (!quoted) out.append("\"...\"");
      quoted = !quoted;
    } else if (!quoted) {
      out.push_back(c);
    }
  }
}

}  // namespace

using history::wallClockMicros;

std::shared_ptr<StatementRun> startRun(std::shared_ptr<const StatementPlan> plan, size_t index,
                                       bool extended) {
  // From the loop's recycled blocks: a run per statement costs no malloc in the steady state.
  auto run = std::allocate_shared<StatementRun>(RecyclingAllocator<StatementRun>{});
  run->max_rows = plan ? plan->decision.max_rows : -1;
  run->plan = std::move(plan);
  run->index = index;
  run->extended = extended;
  run->started_us = wallClockMicros();
  return run;
}

history::Outcome outcomeForError(std::string_view sqlstate) {
  return sqlstate == "57014" ? history::Outcome::kCancelled : history::Outcome::kError;
}

void StatementRecorder::finish(StatementRun& run, const guards::RequestContext& who,
                               const guards::PolicyGroup* policy, history::Outcome outcome,
                               std::string_view sqlstate, std::string_view message) {
  if (run.finished) return;
  run.finished = true;
  if (run.budget_key && budgets_) {
    if (const auto* bg = policy ? budgets::findBudgetGuard(*policy) : nullptr) {
      budgets_->addRows(*bg, *run.budget_key, run.rows_sent);
    }
    budgets_->release(*run.budget_key);
  }

  // The record is a view of what the statement left: the caller's context, the plan's texts, the
  // run's figures. Only what is composed here (guard_actions with the screens' findings, a
  // message without its quoted parts) is copied, into storage kept for the next statement.
  history::RecordView r;
  r.started_at_us = run.started_us;
  r.finished_at_us = wallClockMicros();
  r.duration_us = r.finished_at_us - r.started_at_us;
  r.instance_id = instance_id_;
  r.session_id = who.session_id;
  r.user = who.user;
  r.database = who.database;
  r.policy_group = who.group;
  r.client_addr = who.client_addr;
  r.application_name = who.application_name;
  r.agent_id = who.agent_id;
  r.conversation_id = who.conversation_id;
  r.query_intent_sent = who.query_intent;
  // Over masked columns the constants the caller typed may be their values: the plan keeps a
  // text for history without them, and the server's quotes and the arguments go too.
  const bool masked = run.plan && run.index < run.plan->history_sql.size() &&
                      !run.plan->history_sql[run.index].empty();
  if (run.plan && run.index < run.plan->statements.size()) {
    const auto& st = run.plan->statements[run.index];
    r.query_intent_inferred = st.intent;
    r.statement_kind = st.kind;
    r.tables = st.tables;
    r.sql_text = masked ? std::string_view(run.plan->history_sql[run.index]) : std::string_view(st.sql);
    r.sql_truncated = !masked && st.sql_truncated;
    // The text's fingerprint is this statement's only when the text holds one statement; the
    // writer thread fingerprints a statement of a longer text from its own text.
    if (run.plan->statements.size() == 1) r.fingerprint = run.plan->fingerprint;
    r.guard_actions = run.plan->guard_actions_json;
  } else {
    r.guard_actions = "[]";
  }
  r.outcome = outcome;
  if ((outcome == history::Outcome::kDenied || outcome == history::Outcome::kBudget) && run.plan) {
    r.deny_code = run.plan->decision.deny.code;
  }
  r.sqlstate = sqlstate;
  r.error_message = message;
  if (!message.empty() && masked) {
    // The server quotes what it could not take ("syntax error at or near \"'S001'\"", "invalid
    // input syntax for type integer: \"...\""): over masked columns that may be a value.
    keepWithoutQuotedParts(message, message_);
    r.error_message = message_;
  }
  r.rows_returned = run.rows_sent;
  r.truncated = run.truncated;
  r.rows_affected = run.rows_affected;
  r.bytes_sent = run.bytes_sent;
  r.protocol = !who.protocol.empty() ? std::string_view(who.protocol)
               : run.extended         ? std::string_view("extended")
                                      : std::string_view("simple");
  // A lone zero is "nothing matched" only as an aggregate's answer (count(*) = 0), not as a
  // row's own value (SELECT balance ... WHERE id = 7).
  const analysis::Analysis* a = run.plan ? run.plan->analysis.get() : nullptr;
  r.single_zero = run.single_zero && run.rows_sent == 1 && a && run.index < a->statements.size() &&
                  a->statements[run.index].plain_aggregate;
  r.tool_name = who.tool;
  r.tool_args = who.tool_args;
  if (!r.tool_args.empty() && masked) {
    r.tool_args = R"({"redacted":"the arguments of a call over masked columns"})";
  }
  r.request_id = who.request_id;
  r.traceparent = who.traceparent;
  r.host = run.host;
  warnings_.clear();
  if (!run.screens.empty()) {
    // The screens' findings join the guards' verdicts in one list.
    const std::string screens = actionsJson(run.screens);
    if (r.guard_actions.size() <= 2) {
      actions_ = screens;
    } else {
      actions_.assign(r.guard_actions.substr(0, r.guard_actions.size() - 1));
      actions_.append(",").append(std::string_view(screens).substr(1));
    }
    r.guard_actions = actions_;
    for (const auto& v : run.screens) warnings_.push_back(v.code);
    r.result_warnings = warnings_;
  }
  sink_.onStatement(r, run.plan.get());
  // A spool names the record as it takes it (Spool::push); the in-memory queue does not.
  if (who.record_uids != nullptr && r.spool_seq != 0) {
    who.record_uids->push_back(history::recordUid(r.spool_epoch, r.spool_seq));
  }
  // A long message or list is not held on to for the statements after it.
  if (actions_.capacity() + message_.capacity() > kKeepScratchBytes) {
    actions_ = std::string();
    message_ = std::string();
  }
  if (warnings_.capacity() > 64) warnings_ = std::vector<std::string>();
}

void StatementRecorder::denied(const StatementPlan& plan, const guards::RequestContext& who,
                               const guards::PolicyGroup* policy, const guards::AgentOverrides& overrides) {
  // A denial by any guard but a budget counts towards the conversation's max_denied, as many
  // statements as the text counts against max_statements (at least one).
  if (!plan.budget && policy && budgets_) {
    if (const auto* bg = budgets::findBudgetGuard(*policy)) {
      const int64_t statements = plan.analysis ? budgets::budgetStatements(*plan.analysis) : 1;
      budgets_->addDenied(*bg, budgets_->keyFor(who), statements);
    }
  }
  // A denied text counts as each of its statements.
  auto shared = std::shared_ptr<const StatementPlan>(std::shared_ptr<const StatementPlan>{}, &plan);
  for (size_t i = 0; i < plan.statements.size(); ++i) {
    StatementRun run;
    run.plan = shared;
    run.index = i;
    run.extended = who.extended;
    run.started_us = wallClockMicros();
    run.overrides = overrides;
    finish(run, who, policy, plan.budget ? history::Outcome::kBudget : history::Outcome::kDenied,
           plan.decision.deny.sqlstate, plan.decision.deny.message);
  }
}

}  // namespace pgwarden::session
