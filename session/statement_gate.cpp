#include "session/statement_gate.h"

#include <algorithm>
#include <chrono>
#include <type_traits>

#include "analysis/plan.h"
#include "guards/codes.h"
#include "guards/pooled_state_check.h"
#include "guards/untrusted.h"
#include "guards/webhook_guard.h"
#include "net/webhook_client.h"
#include "protocol/messages.h"

namespace pgwarden::session {

namespace {

// A text of more bytes than this is not kept for the next statement.
constexpr size_t kKeepTextBytes = 64 * 1024;

int64_t monotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const guards::WebhookGuard* webhookGuardOf(const guards::PolicyGroup* group, const StatementPlan& plan) {
  if (!group || !plan.decision.webhook || plan.decision.webhook->guard >= group->guards().size()) return nullptr;
  return dynamic_cast<const guards::WebhookGuard*>(group->guards()[plan.decision.webhook->guard].get());
}

// A text the chain refused because libpg_query could not parse it, which the server's parser may
// answer: a syntax error, or nesting too deep for pgwarden's walk (the server's own limit may
// come first). Not a text that is not UTF-8 (pgwarden already answers with the server's words),
// nor one with a zero byte, which a Parse cannot carry.
bool serverMayParse(const StatementPlan& plan, std::string_view sql) {
  const guards::Decision& d = plan.decision;
  if (!d.denied || d.deny.guard != "parser" || !plan.analysis || plan.analysis->ok) return false;
  const std::string& state = plan.analysis->error_sqlstate;
  if (!state.empty() && state != "54001") return false;
  return sql.find('\0') == std::string_view::npos;
}

// The Parse message's own refusal of a text of several statements: the server's parser accepted
// the text, so a Query of it would have run them. It is the server's answer to a client's Parse,
// never to a Query. PostgreSQL names the routine ('R') in every error it sends; without one, a
// 42601 with no position is taken as that refusal (the parser's errors carry a position).
bool severalStatementsRefused(std::string_view error_response) {
  if (error_response.size() <= 5) return false;
  auto e = protocol::parseErrorFields(error_response.substr(5));
  if (!e || e->sqlstate() != guards::codes::kSqlstateSyntax) return false;
  const std::string_view routine = e->get('R');
  return routine.empty() ? e->get('P').empty() : routine == "exec_parse_message";
}

}  // namespace

guards::RequestContext StatementGate::requestContext() const {
  auto ctx = caller_.requestContext(request_.extended, request_.overrides);
  const auto& types = request_.explain_args.param_types;
  ctx.inferred_params = std::all_of(types.begin(), types.end(), [](uint32_t t) { return t == 0; });
  return ctx;
}

// Measured with GCC 12 / libstdc++ on x86-64: a request that grew has a field clear() does not
// reset yet.
#if defined(__x86_64__) && defined(__GLIBCXX__)
static_assert(sizeof(GateRequest) == 576, "a new GateRequest field: reset it in clear()");
#endif

void GateRequest::clear() {
  // Storage for this many parameters is kept for the next Bind; a longer list's is let go.
  static constexpr size_t kKeepParams = 64;
  sql = {};
  plan.reset();
  overrides = {};
  extended = admit = false;
  explain = Explain::kSkip;
  auto empty = [](auto& list) {
    if (list.capacity() > kKeepParams) {
      std::remove_reference_t<decltype(list)>().swap(list);
    } else {
      list.clear();
    }
  };
  empty(explain_args.param_types);
  empty(explain_args.param_formats);
  empty(explain_args.params);
  explain_args.bound = false;
  plan_check = nullptr;
  refusal.reset();
}

bool StatementGate::decide(GateRequest&& request, GateVerdict& out) {
  // Idle and holding nothing: the last verdict taken (or cancel) cleared the request already.
  if (stage_ != Stage::kIdle || webhook_id_ != 0 || budget_ticket_ != 0 || key_ || plan_) cancel();
  sql_.assign(request.sql);
  request_ = std::move(request);
  request_.sql = sql_;
  plan_ = request_.plan;
  write_ = {};
  stage_ = Stage::kChain;
  if (!advance()) return false;
  out = takeVerdict();
  return true;
}

bool StatementGate::advance() {
  while (true) {
    switch (stage_) {
      case Stage::kIdle:
        return false;  // cancelled meanwhile
      case Stage::kChain:
        if (!plan_) {
          const auto ctx = requestContext();
          const auto stats = services_.stats ? services_.stats() : nullptr;
          if (request_.refusal) {
            plan_ = services_.policy->plan(nullptr, request_.sql, ctx, stats.get());
            guards::Decision d = plan_->decision;
            if (!d.denied) guards::applyDenial(d, renderOutside("tool_arguments", std::move(*request_.refusal)));
            plan_ = PolicyEngine::withDecision(*plan_, std::move(d));
            stage_ = Stage::kDone;
            continue;
          }
          if (judgeWrite(ctx, stats.get())) {
            stage_ = Stage::kDone;
            continue;
          }
          plan_ = services_.policy->plan(caller_.policyGroup(), request_.sql, ctx, stats.get());
          if (caller_.transactionPooled()) judgeSessionState();
        }
        judgeUntrusted();
        stage_ = Stage::kParse;
        continue;
      case Stage::kParse:
        stage_ = Stage::kWebhook;
        if (!startParseCheck()) {
          stage_ = Stage::kParse;
          return false;
        }
        continue;
      case Stage::kWebhook:
        // Each webhook guard of the chain in turn; the chain goes on after each answer.
        if (plan_->decision.webhook) {
          if (!startWebhook()) return false;
          continue;
        }
        stage_ = Stage::kExplain;
        continue;
      case Stage::kExplain:
        stage_ = Stage::kBudget;
        if (!startExplain()) {
          stage_ = Stage::kExplain;
          return false;
        }
        continue;
      case Stage::kBudget:
        if (request_.admit && !plan_->decision.denied && !admit()) return false;
        stage_ = Stage::kDone;
        continue;
      case Stage::kDone:
        return true;
    }
  }
}

void StatementGate::resume() {
  waiting_ = false;
  if (!advance()) return;
  GateVerdict v = takeVerdict();
  done_(std::move(v));
}

GateVerdict StatementGate::takeVerdict() {
  GateVerdict v;
  v.plan = std::move(plan_);
  v.budget_key = std::move(key_);
  v.overrides = std::move(request_.overrides);
  v.explain_error = std::move(explain_error_);
  v.write = std::move(write_);
  write_ = {};
  resetRequest();
  explain_error_.clear();
  stage_ = Stage::kIdle;
  waiting_ = false;
  return v;
}

bool StatementGate::startWebhook() {
  const guards::WebhookGuard* guard = webhookGuardOf(caller_.policyGroup(), *plan_);
  if (!guard || !services_.webhooks) {
    // Cannot happen while the daemon runs; fail the check rather than skip it.
    guards::WebhookOutcome o;
    o.error = "no webhook client";
    onWebhookAnswer(std::move(o));
    return true;
  }
  waiting_ = true;
  webhook_started_ns_ = monotonicNs();
  webhook_id_ = services_.webhooks->post(
      net::webhookRequestFor(*guard, plan_->decision.webhook->body),
      [this](guards::WebhookOutcome o) {
        webhook_id_ = 0;
        if (o.status != guards::WebhookOutcome::Status::kCancelled) {
          const auto ctx = requestContext();
          if (ctx.observer) {
            ctx.observer->externalCall(guards::GuardObserver::External::kWebhook, guards::webhookCallResult(o),
                                       std::chrono::nanoseconds(monotonicNs() - webhook_started_ns_));
          }
        }
        onWebhookAnswer(std::move(o));
        resume();
      });
  return false;
}

void StatementGate::onWebhookAnswer(guards::WebhookOutcome outcome) {
  const guards::PolicyGroup* group = caller_.policyGroup();
  if (!group || !plan_->analysis) {
    // Nothing to resume the chain with: the statement is judged as it stood.
    plan_ = PolicyEngine::withDecision(*plan_, [&] {
      guards::Decision d = plan_->decision;
      d.webhook.reset();
      return d;
    }());
    return;
  }
  const auto ctx = requestContext();
  const auto stats = services_.stats ? services_.stats() : nullptr;
  plan_ = PolicyEngine::withDecision(
      *plan_, group->resumeWebhook(plan_->decision, outcome, *plan_->analysis, request_.sql, ctx, stats.get()));
}

bool StatementGate::startExplain() {
  using Explain = GateRequest::Explain;
  const guards::Decision& d = plan_->decision;
  if (d.denied) return true;
  const bool tool_check = static_cast<bool>(request_.plan_check);
  if (!tool_check) {
    if (request_.explain == Explain::kSkip || !d.explain_sql) return true;
    // The plan depends on the parameters: the gate runs when a Bind brings them.
    if (request_.explain == Explain::kRunOrDefer && d.explain_needs_params) return true;
  }
  const guards::PolicyGroup* group = caller_.policyGroup();
  // A plan check names tables by schema: VERBOSE puts the schema into each scan.
  const std::string sql = tool_check ? "EXPLAIN (FORMAT JSON, VERBOSE) " +
                                           (d.rewritten_sql ? *d.rewritten_sql : sql_)
                                     : *d.explain_sql;
  const bool needs_params = tool_check ? !request_.explain_args.params.empty() : d.explain_needs_params;
  const bool runnable = (group || tool_check) && (!needs_params || request_.explain_args.bound);
  if (runnable && caller_.runExplain(sql, request_.extended, request_.explain_args)) {
    waiting_ = true;
    return false;
  }
  guards::Decision out = group ? group->planUnavailable(d) : d;
  if (tool_check) runPlanCheck(out, {});
  plan_ = PolicyEngine::withDecision(*plan_, std::move(out));
  return true;
}

bool StatementGate::startParseCheck() {
  if (request_.plan || request_.refusal || !serverMayParse(*plan_, sql_)) return true;
  if (!caller_.runParseCheck(sql_, request_.extended, request_.explain_args.param_types))
    return true;
  waiting_ = true;
  return false;
}

void StatementGate::parseChecked(std::string error_response) {
  if (stage_ != Stage::kParse || !waiting_) return;
  if (error_response.empty() || (!request_.extended && severalStatementsRefused(error_response))) {
    // The server's parser took the text pgwarden cannot analyse: pgwarden's own denial stands
    // (the text never runs).
    stage_ = Stage::kWebhook;
  } else {
    // The server refused the text, in its own words: that is the answer, and not a denial of
    // pgwarden's (the text was the server's to refuse; history records the server's error).
    explain_error_ = std::move(error_response);
    plan_ = PolicyEngine::withDecision(*plan_, guards::Decision{});
    stage_ = Stage::kDone;
  }
  resume();
}

bool StatementGate::judgeWrite(const guards::RequestContext& ctx,
                               const analysis::TableStatsSnapshot* stats) {
  const WriteTransaction* w = caller_.writeTransaction();
  const guards::PolicyGroup* group = caller_.policyGroup();
  if (!group || !group->writes().guarded) return false;
  // The text's analysis alone (cached by text, so the chain's plan below reuses it).
  auto analysed = services_.policy->plan(nullptr, request_.sql, ctx, stats);
  if (!analysed->analysis || !analysed->analysis->ok) return false;  // the chain reports it
  const guards::GuardInput in{*analysed->analysis, request_.sql, ctx, stats, group->settings()};
  WriteTransaction::Judgement j;
  if (w) {
    j = w->judge(in, request_.extended);
  } else {
    // A front end without the write mode (MCP today) runs a write group's statements on the
    // read-only pool: its chain has no read_only guard, so the write mode's read checks stand in.
    for (const auto& st : analysed->analysis->statements) {
      for (const auto* g : {group->writes().function_checks.get(), group->writes().read_checks.get()}) {
        if (j.deny || !g) continue;
        guards::GuardResult r = g->checkStatement(in, st);
        if (r.action == guards::Action::kDeny) j.deny = std::move(r);
      }
    }
  }
  if (!j.deny) {
    write_ = {j.wrap, std::move(j.table), std::move(j.command), j.at_execute};
    return false;
  }
  guards::Decision d = analysed->decision;
  guards::applyDenial(d, renderOutside("guarded_writes", std::move(*j.deny)));
  plan_ = PolicyEngine::withDecision(*analysed, std::move(d));
  return true;
}

void StatementGate::judgeSessionState() {
  if (plan_->decision.denied || !plan_->analysis || !plan_->analysis->ok) return;
  for (const auto& st : plan_->analysis->statements) {
    auto r = guards::sessionStateUse(st);
    if (!r) continue;
    guards::Decision d = plan_->decision;
    guards::applyDenial(d, renderOutside("transaction_pooling", std::move(*r)));
    plan_ = PolicyEngine::withDecision(*plan_, std::move(d));
    return;
  }
}

void StatementGate::judgeUntrusted() {
  const guards::PolicyGroup* group = caller_.policyGroup();
  const guards::UntrustedContent* rule = group ? group->untrusted() : nullptr;
  if (!rule || !services_.marks || !plan_ || plan_->decision.denied || !plan_->analysis ||
      !plan_->analysis->ok) {
    return;
  }
  const auto ctx = requestContext();
  const std::string key =
      guards::ConversationMarks::key(group->name(), ctx.user, ctx.conversation_id, ctx.session_id);
  if (auto mark = services_.marks->find(key)) {
    if (auto what =
            rule->refused(*plan_->analysis, plan_->decision.webhook.has_value(), ctx.tool)) {
      guards::Decision d = plan_->decision;
      guards::applyDenial(
          d, renderOutside("untrusted_content", guards::untrustedFlowDenial(*mark, *what)));
      plan_ = PolicyEngine::withDecision(*plan_, std::move(d));
      write_ = {};
      return;
    }
  }
  // A prepared statement judged again at its Bind or Execute brings its plan, not its text.
  const auto& statements = plan_->analysis->statements;
  std::optional<std::string> read;
  for (size_t i = 0; i < statements.size() && !read; ++i) {
    const bool own = sql_.empty() && i < plan_->statements.size();
    read = rule->reads(statements[i],
                       own ? std::string_view(plan_->statements[i].sql) : std::string_view(sql_));
  }
  if (!read) return;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  services_.marks->mark(key, *read, std::chrono::duration_cast<std::chrono::seconds>(now).count());
  // A prepared statement judged again at its Execute was told at its Parse.
  for (const auto& v : plan_->decision.actions) {
    if (v.code == guards::codes::kUntrustedRead) return;
  }
  guards::Decision d = plan_->decision;
  guards::Verdict v = renderOutside("untrusted_content", guards::untrustedReadWarning(*read));
  d.actions.push_back(v);
  d.warnings.push_back(std::move(v));
  plan_ = PolicyEngine::withDecision(*plan_, std::move(d));
}

guards::Verdict StatementGate::renderOutside(std::string_view kind, guards::GuardResult r) const {
  if (const guards::PolicyGroup* group = caller_.policyGroup()) return group->renderOutside(kind, std::move(r));
  guards::Verdict v;
  v.guard = std::string(kind);
  v.action = r.action;
  v.code = r.code;
  v.sqlstate = r.sqlstate.empty() ? std::string(guards::codes::sqlstateFor(r.code)) : r.sqlstate;
  v.message = r.message;
  v.detail = r.facts.json(r.code);
  v.hint = r.hint;
  return v;
}

void StatementGate::runPlanCheck(guards::Decision& d, std::string_view plan_json) {
  if (!request_.plan_check || d.denied) return;
  const auto render = [this](guards::GuardResult r) { return renderOutside("tool_plan_check", std::move(r)); };
  auto plan = plan_json.empty() ? Result<analysis::PlanSummary>::fail("no plan")
                                : analysis::parsePlanJson(plan_json);
  if (!plan.ok()) {
    // The check cannot vouch for a plan it did not see: it fails closed.
    guards::GuardResult r;
    r.action = guards::Action::kDeny;
    r.code = std::string(guards::codes::kPlanUnavailable);
    r.message = "pgwarden could not plan this call to check that it uses an index; try again shortly.";
    r.facts.add("next_step", "call again; if it keeps failing, report it to the operator");
    guards::applyDenial(d, render(std::move(r)));
    return;
  }
  if (auto r = request_.plan_check(*plan)) guards::applyDenial(d, render(std::move(*r)));
}

void StatementGate::explainDone(std::string plan_json) {
  if (stage_ != Stage::kExplain || !waiting_) return;
  const guards::PolicyGroup* group = caller_.policyGroup();
  const auto stats = services_.stats ? services_.stats() : nullptr;
  guards::Decision d = !group ? plan_->decision
                       : plan_json.empty() ? group->planUnavailable(plan_->decision)
                                           : group->evaluatePlan(plan_->decision, plan_json, stats.get());
  runPlanCheck(d, plan_json);
  plan_ = PolicyEngine::withDecision(*plan_, std::move(d));
  stage_ = Stage::kBudget;
  resume();
}

void StatementGate::explainFailed(std::string error_response) {
  if (stage_ != Stage::kExplain || !waiting_) return;
  // "If the EXPLAIN itself fails with a server error (an unknown column, say), that error is
  // the statement's answer": it is not admitted, it will not run.
  explain_error_ = std::move(error_response);
  stage_ = Stage::kDone;
  resume();
}

bool StatementGate::admit() {
  budgets::BudgetLedger* ledger = services_.budgets;
  const guards::PolicyGroup* group = caller_.policyGroup();
  size_t index = 0;
  const budgets::BudgetGuard* bg = group ? budgets::findBudgetGuard(*group, &index) : nullptr;
  if (!ledger || !bg) return true;
  if (!plan_->analysis || !budgets::countsAgainstBudget(*plan_->analysis))
    return true;  // housekeeping
  auto key = std::make_shared<const budgets::BudgetKey>(
      ledger->keyFor(caller_.requestContext(false, request_.overrides)));
  const auto deny = [this, group, index](guards::GuardResult r) {
    guards::Decision d = plan_->decision;
    guards::applyDenial(d, group->render(index, std::move(r)));
    plan_ = PolicyEngine::withDecision(*plan_, std::move(d));
  };
  // Each statement of a multi-statement text counts once; the text is admitted whole or not.
  const int64_t statements = budgets::budgetStatements(*plan_->analysis);
  auto a = ledger->admit(
      *bg, *key,
      [this, key, deny](budgets::BudgetLedger::Admission r) {
        budget_ticket_ = 0;
        if (r.kind == budgets::BudgetLedger::Admission::Kind::kAdmitted) {
          key_ = key;
        } else {
          deny(std::move(r.denial));
        }
        stage_ = Stage::kDone;
        resume();
      },
      statements);
  switch (a.kind) {
    case budgets::BudgetLedger::Admission::Kind::kAdmitted:
      key_ = std::move(key);
      return true;
    case budgets::BudgetLedger::Admission::Kind::kDenied:
      deny(std::move(a.denial));
      return true;
    case budgets::BudgetLedger::Admission::Kind::kPending:
      budget_ticket_ = a.ticket;
      waiting_ = true;
      return false;
  }
  return true;
}

void StatementGate::cancel() {
  if (webhook_id_) {
    if (services_.webhooks) services_.webhooks->cancel(webhook_id_);
    webhook_id_ = 0;
  }
  if (budget_ticket_) {
    if (services_.budgets) services_.budgets->cancel(budget_ticket_);
    budget_ticket_ = 0;
  }
  if (key_ && services_.budgets) services_.budgets->release(*key_);
  key_.reset();
  plan_.reset();
  resetRequest();
  explain_error_.clear();
  stage_ = Stage::kIdle;
  waiting_ = false;
}

void StatementGate::resetRequest() {
  request_.clear();
  if (sql_.capacity() > kKeepTextBytes) sql_ = std::string();
}

void StatementGate::discard(GateVerdict& verdict) {
  if (verdict.budget_key && services_.budgets) services_.budgets->release(*verdict.budget_key);
  verdict.budget_key.reset();
}

}  // namespace pgwarden::session
