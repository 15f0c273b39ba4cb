// The guard chain (PolicyGroup::evaluate and its plan half), operator reason overrides and the
// syntax-error denial. The `groups:` config parser is policy_config.cpp.
#include "guards/policy.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>

#include "analysis/plan.h"
#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/masking.h"
#include "guards/untrusted.h"
#include "guards/fixed_settings.h"
#include "guards/guard.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

const char* actionName(Action a) {
  switch (a) {
    case Action::kAllow: return "allow";
    case Action::kWarn: return "warn";
    case Action::kDeny: return "deny";
    case Action::kRewrite: return "rewrite";
  }
  return "allow";
}

const GuardRegistry& GuardRegistry::builtin() {
  static const GuardRegistry registry = [] {
    GuardRegistry r;
    r.add("read_only", makeReadOnlyGuard);
    r.add("functions", makeFunctionsGuard);
    r.add("tables", makeTablesGuard);
    r.add("multi_statement", makeMultiStatementGuard);
    r.add("require_predicate", makeRequirePredicateGuard);
    r.add("row_limit", makeRowLimitGuard);
    r.add("cost_gate", makeCostGateGuard);
    return r;
  }();
  return registry;
}

namespace {

// Replaces {fact} placeholders with the verdict's facts; unknown ones stay as written.
std::string substitute(const std::string& text, const Facts& facts, const std::string& subject) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '{') {
      const size_t close = text.find('}', i + 1);
      if (close != std::string::npos) {
        const std::string key = text.substr(i + 1, close - i - 1);
        const std::string* v = facts.text(key);
        if (v) {
          out += *v;
          i = close + 1;
          continue;
        }
        if (key == "subject") {
          out += subject;
          i = close + 1;
          continue;
        }
      }
    }
    out += text[i++];
  }
  return out;
}

// Applies non-overlapping edits (earlier-registered wins on overlap) to `text`, whose first byte
// is at `base` in the coordinates the edits use, written over `out` (its storage kept).
void applyEditsInto(std::string& out, std::string_view text, size_t base, const TextEdits& edits) {
  const auto inside = [&](const TextEdit& e) {
    return e.offset >= base && e.offset + e.length <= base + text.size();
  };
  out.clear();
  if (edits.size() == 1 && inside(edits.front())) {
    // The usual case (row_limit's LIMIT): at most one allocation, the result's exact size.
    const TextEdit& e = edits.front();
    const size_t at = e.offset - base;
    out.reserve(text.size() - e.length + e.replacement.size());
    out.append(text.substr(0, at)).append(e.replacement).append(text.substr(at + e.length));
    return;
  }
  std::vector<const TextEdit*> kept;
  for (const auto& e : edits) {
    if (!inside(e)) continue;
    bool clash = false;
    for (const TextEdit* k : kept) {
      clash = clash || (e.offset < k->offset + k->length && k->offset < e.offset + e.length) ||
              e.offset == k->offset;
    }
    if (!clash) kept.push_back(&e);
  }
  std::sort(kept.begin(), kept.end(), [](const TextEdit* a, const TextEdit* b) { return a->offset > b->offset; });
  out.assign(text);
  for (const TextEdit* e : kept) out.replace(e->offset - base, e->length, e->replacement);
}

std::string applyEdits(std::string_view text, size_t base, const TextEdits& edits) {
  std::string out;
  applyEditsInto(out, text, base, edits);
  return out;
}

// `to` takes `from`'s text: copied into its own storage when that is large enough (a reused
// verdict), else it takes `from`'s storage.
void refill(std::string& to, std::string& from) {
  if (to.capacity() >= from.size()) {
    to.assign(from);
  } else {
    to.swap(from);
  }
}

void clearVerdict(Verdict& v) {
  v.guard.clear();
  v.action = Action::kAllow;
  v.code.clear();
  v.sqlstate.clear();
  v.message.clear();
  v.detail.clear();
  v.hint.clear();
  v.position = 0;
}

// A guard's answer as a verdict, with the group's reason overrides, written over `v` (a new
// verdict, or one of a reused decision: its strings' storage is kept).
void fillVerdict(const ReasonOverrides& reasons, std::string_view kind, bool warn_only,
                 GuardResult& r, Verdict& v) {
  v.guard.assign(kind);
  v.action = r.action;
  if (v.action == Action::kDeny && warn_only) v.action = Action::kWarn;
  v.code.assign(r.code);
  if (v.action != Action::kDeny) {
    v.sqlstate.assign(codes::kSqlstateWarning);
  } else if (r.sqlstate.empty()) {
    v.sqlstate.assign(codes::sqlstateFor(r.code));
  } else {
    v.sqlstate.assign(r.sqlstate);
  }
  refill(v.message, r.message);
  if (auto code = reasons.find(r.code); code != reasons.end()) {
    auto it = code->second.find(r.subject);
    if (it == code->second.end()) it = code->second.find("*");
    if (it != code->second.end()) v.message = substitute(it->second, r.facts, r.subject);
  }
  // The detail is sent only with a denial or a warning. A rewrite's verdict goes to history
  // (guard, action, code, message) and metrics, neither of which reads it, and every read
  // without a LIMIT is one: its cut, if any, is reported by Decision::truncation.
  if (v.action == Action::kDeny || v.action == Action::kWarn) {
    v.detail = r.facts.json(r.code);
  } else {
    v.detail.clear();
  }
  refill(v.hint, r.hint);
  v.position = 0;
}

// The result every guard's checkStatementInto writes over, one per loop thread: the chain runs
// to its end (or its pause) before it is used again.
GuardResult& chainScratch() {
  thread_local GuardResult r;
  return r;
}

}  // namespace

std::vector<std::string> protectedFor(const std::vector<std::string>& search_path) {
  std::vector<std::string> out = defaultProtectedSettings();
  if (!search_path.empty()) out.push_back("search_path");
  return out;
}

PolicyGroup::PolicyGroup(std::string name, std::vector<std::unique_ptr<Guard>> guards,
                         std::vector<std::string> search_path, ReasonOverrides reasons,
                         std::map<std::string, Action, std::less<>> result_screens)
    : name_(std::move(name)),
      guards_(std::move(guards)),
      search_path_(std::move(search_path)),
      reasons_(std::move(reasons)),
      settings_(std::make_unique<GroupSettings>(
          GroupSettings{name_, search_path_, protectedFor(search_path_), std::move(result_screens)})) {
  settings_->reasons = &reasons_;
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);
  for (const auto& g : guards_) {
    deterministic_ = deterministic_ && g->deterministic();
    if (g->literalBlind()) ++blind_guards_;
  }
}

PolicyGroup::~PolicyGroup() = default;

void PolicyGroup::setDeclarations(std::vector<DeclaredColumn> soft_delete,
                                  std::vector<ResultAssertion> assertions) {
  if (!soft_delete.empty()) analysis::noteSoftDeleteDeclared();
  settings_->soft_delete_columns = std::move(soft_delete);
  settings_->result_assertions = std::move(assertions);
}

void PolicyGroup::setScreenProbe(int timeout_ms) { settings_->screen_probe_ms = timeout_ms; }

WriteMode::WriteMode() = default;
WriteMode::~WriteMode() = default;
WriteMode::WriteMode(WriteMode&&) noexcept = default;
WriteMode& WriteMode::operator=(WriteMode&&) noexcept = default;

Verdict PolicyGroup::finalize(const Guard& guard, GuardResult r) const {
  return finalize(guard.kind(), guard.warnOnly(), std::move(r));
}

Verdict PolicyGroup::renderScreen(GuardResult r) const { return finalize("result_screen", false, std::move(r)); }

Verdict PolicyGroup::finalize(std::string_view kind, bool warn_only, GuardResult r) const {
  Verdict v;
  fillVerdict(reasons_, kind, warn_only, r, v);
  return v;
}

constexpr std::string_view kTruncationNextStep = "narrow the query with WHERE, GROUP BY or ORDER BY ... LIMIT";

// Where the chain is: the guard (and, inside it, the statement) to run next, and what the guards
// before it asked for. A paused decision keeps it so the chain can go on where it stopped.
struct ChainState {
  size_t guard = 0;
  size_t statement = 0;        // next statement of `guard` to check
  bool text_done = false;      // `guard`'s checkText already ran
  TextEdits edits;
  int64_t max_rows = -1;
  size_t cap_guard = 0;  // the capping guard's notice and hint wait in the decision's truncation
  // A reused decision's storage (recycle below): its verdicts and its rewritten text's string.
  std::array<Verdict, 2> spare;
  size_t spares = 0;
  std::string rewritten;

  Verdict spareVerdict() { return spares > 0 ? std::move(spare[--spares]) : Verdict{}; }
};

namespace {

// Empties `d` for the chain to fill again. What is worth its storage is kept: the verdicts and
// the rewritten text's string go to `st`, the truncation notice's strings and the lists stay.
void recycle(Decision& d, ChainState& st) {
  d.denied = false;
  clearVerdict(d.deny);
  d.warnings.clear();
  for (Verdict& v : d.actions) {
    if (st.spares == st.spare.size()) break;
    st.spare[st.spares++] = std::move(v);
  }
  d.actions.clear();
  if (d.rewritten_sql) st.rewritten = std::move(*d.rewritten_sql);
  d.rewritten_sql.reset();
  d.edits.clear();
  d.max_rows = -1;
  d.truncation_notice.clear();
  clearVerdict(d.truncation);
  d.explain_sql.reset();
  d.explain_needs_params = false;
  d.plan_guards.clear();
  d.estimated_rows = -1;
  d.webhook.reset();
}

}  // namespace

Decision PolicyGroup::evaluate(const analysis::Analysis& analysis, std::string_view sql,
                               const RequestContext& ctx,
                               const analysis::TableStatsSnapshot* stats) const {
  Decision d;
  evaluate(analysis, sql, ctx, stats, d);
  return d;
}

void PolicyGroup::evaluate(const analysis::Analysis& analysis, std::string_view sql,
                           const RequestContext& ctx, const analysis::TableStatsSnapshot* stats,
                           Decision& d) const {
  evaluateInto(analysis, sql, ctx, stats, d, nullptr);
}

void PolicyGroup::evaluate(const analysis::Analysis& analysis, std::string_view sql,
                           const RequestContext& ctx, const analysis::TableStatsSnapshot* stats,
                           Decision& d, BlindGuards& blind) const {
  blind.clean = false;
  evaluateInto(analysis, sql, ctx, stats, d, &blind);
}

void PolicyGroup::evaluateInto(const analysis::Analysis& analysis, std::string_view sql,
                               const RequestContext& ctx, const analysis::TableStatsSnapshot* stats,
                               Decision& d, BlindGuards* blind) const {
  // A group's masked columns: their statistics are their values, kept from every guard's text.
  const auto visible = masking_ ? masking_->visibleStats(stats) : nullptr;
  if (visible) stats = visible.get();
  ChainState st;
  recycle(d, st);
  if (!analysis.ok) {
    applyDenial(d, syntaxErrorVerdict(analysis, sql));
    return;
  }
  // Whatever the group's guards: pgwarden must go on reading texts as the server does.
  for (const auto& stmt : analysis.statements) {
    if (auto r = fixedSettingChange(stmt)) {
      applyDenial(d, renderOutside("fixed_settings", std::move(*r)));
      return;
    }
  }
  runChainInto(analysis, sql, ctx, stats, d, st, blind);
}

Decision PolicyGroup::runChain(const analysis::Analysis& analysis, std::string_view sql,
                               const RequestContext& ctx, const analysis::TableStatsSnapshot* stats,
                               Decision d, ChainState st) const {
  runChainInto(analysis, sql, ctx, stats, d, st);
  return d;
}

void PolicyGroup::runChainInto(const analysis::Analysis& analysis, std::string_view sql,
                               const RequestContext& ctx, const analysis::TableStatsSnapshot* stats,
                               Decision& d, ChainState& st, BlindGuards* blind) const {
  const GuardInput in{analysis, sql, ctx, stats, *settings_};
  const bool skip_blind = blind && blind->skip;
  size_t blind_quiet = 0;  // literal-blind guards that ran and had nothing to say
  // Each guard's time runs from the previous guard's end: one clock read per guard, not two.
  using Clock = std::chrono::steady_clock;
  Clock::time_point mark = ctx.observer ? Clock::now() : Clock::time_point{};

  for (; st.guard < guards_.size(); ++st.guard, st.statement = 0, st.text_done = false) {
    const size_t i = st.guard;
    const Guard& g = *guards_[i];
    const bool literal_blind = g.literalBlind();
    if (skip_blind && literal_blind) continue;
    bool objected = false;
    // Returns true when the chain must stop (a deny, or a pause for a webhook).
    auto take = [&](GuardResult& r) {
      objected = objected || r.objects();
      if (r.wants_plan && std::find(d.plan_guards.begin(), d.plan_guards.end(), i) == d.plan_guards.end()) {
        d.plan_guards.push_back(i);
      }
      if (st.edits.empty()) {
        st.edits = std::move(r.edits);
      } else {
        for (auto& e : r.edits) st.edits.push_back(std::move(e));
      }
      r.edits.clear();
      if (r.max_rows >= 0 && (st.max_rows < 0 || r.max_rows < st.max_rows)) {
        st.max_rows = r.max_rows;
        st.cap_guard = i;
        refill(d.truncation.message, r.truncation_notice);
        // A rewrite's hint is read only from the truncation notice, so it moves there.
        if (r.action == Action::kRewrite) {
          refill(d.truncation.hint, r.hint);
          r.hint.clear();
        } else {
          d.truncation.hint.assign(r.hint);
        }
      }
      if (r.wants_webhook && r.action == Action::kAllow) {
        d.webhook = Decision::WebhookCall{i, std::move(r.webhook_body), nullptr};
        return true;
      }
      if (r.action == Action::kAllow) return false;
      Verdict v = st.spareVerdict();
      fillVerdict(reasons_, g.kind(), g.warnOnly(), r, v);
      if (v.action == Action::kRewrite) {
        d.actions.push_back(std::move(v));
        return false;
      }
      if (v.action == Action::kDeny) {
        applyDenial(d, std::move(v));
        return true;
      }
      d.actions.push_back(v);
      if (v.action == Action::kWarn) d.warnings.push_back(std::move(v));
      return false;
    };
    // One observation per guard and text, no allocation. A guard the chain paused at (a
    // webhook) was observed before the pause; its resumption is not a second one.
    const bool observe = ctx.observer && !st.text_done;
    bool stop = false;
    if (!st.text_done) {
      st.text_done = true;
      GuardResult r = g.checkText(in);
      stop = take(r);
    }
    while (!stop && st.statement < analysis.statements.size()) {
      const auto& stmt = analysis.statements[st.statement++];
      GuardResult& r = chainScratch();
      r.clear();
      g.checkStatementInto(in, stmt, r);
      stop = take(r);
    }
    if (ctx.observer) {
      const Clock::time_point now = Clock::now();
      if (observe) ctx.observer->guardEvaluated(g.kind(), now - mark);
      mark = now;
    }
    if (literal_blind && !objected) ++blind_quiet;
    if (stop) break;
  }
  if (blind && !skip_blind) blind->clean = blind_quiet == blind_guards_;
  if (d.webhook) {
    // Paused: the rest of the chain (and the plan, rewrite and cap) waits for the answer.
    d.webhook->state = std::make_shared<const ChainState>(std::move(st));
    return;
  }
  if (d.denied) {
    d.plan_guards.clear();
    return;
  }
  finishChain(analysis, sql, d, st);
}

void PolicyGroup::finishChain(const analysis::Analysis& analysis, std::string_view sql,
                              Decision& d, ChainState& st) const {
  if (!st.edits.empty()) {
    applyEditsInto(st.rewritten, sql, 0, st.edits);
    d.rewritten_sql = std::move(st.rewritten);
  }
  if (st.max_rows >= 0) {
    d.max_rows = st.max_rows;
    Verdict& t = d.truncation;
    t.guard.assign(guards_[st.cap_guard]->kind());
    t.action = Action::kWarn;
    t.code.assign(codes::kRowsTruncated);
    t.sqlstate.assign(codes::kSqlstateWarning);
    // Built for every capped read, sent only when the cut happens: the detail is left to
    // truncationDetail() when the notice is sent, and Facts are made only for an operator's
    // reason, whose placeholders need them.
    if (auto code = reasons_.find(codes::kRowsTruncated); code != reasons_.end()) {
      if (auto it = code->second.find("*"); it != code->second.end()) {
        Facts facts;
        facts.add("max_rows", st.max_rows).add("next_step", kTruncationNextStep);
        std::string reason = substitute(it->second, facts, "");
        // A reason that renders empty: the session sends the guard's own notice, on its own.
        if (reason.empty()) d.truncation_notice = std::move(t.message);
        t.message = std::move(reason);
      }
    }
  }
  if (!d.plan_guards.empty() && analysis.statements.size() == 1) {
    const analysis::StatementInfo& stmt = analysis.statements.front();
    const size_t begin = static_cast<size_t>(std::max(stmt.location, 0));
    const size_t len = std::min(static_cast<size_t>(std::max(stmt.length, 0)), sql.size() - begin);
    d.explain_sql = "EXPLAIN (FORMAT JSON) " + applyEdits(sql.substr(begin, len), begin, st.edits);
    d.explain_needs_params = stmt.max_param > 0;
  } else {
    d.plan_guards.clear();
  }
  d.edits = std::move(st.edits);
}

std::string truncationDetail(int64_t max_rows) {
  char digits[24];
  const auto n = std::to_chars(digits, digits + sizeof digits, max_rows);
  // Facts::json's output for these two facts (the code and the step need no escaping).
  std::string detail;
  detail.reserve(64 + codes::kRowsTruncated.size() + kTruncationNextStep.size());
  detail.append("{\"code\":\"").append(codes::kRowsTruncated).append("\",\"max_rows\":");
  detail.append(digits, n.ptr).append(",\"next_step\":\"").append(kTruncationNextStep).append("\"}");
  return detail;
}

Decision PolicyGroup::resumeWebhook(const Decision& pending, const WebhookOutcome& outcome,
                                    const analysis::Analysis& analysis, std::string_view sql,
                                    const RequestContext& ctx,
                                    const analysis::TableStatsSnapshot* stats) const {
  const auto visible = masking_ ? masking_->visibleStats(stats) : nullptr;
  if (visible) stats = visible.get();
  if (!pending.webhook || !pending.webhook->state || pending.webhook->guard >= guards_.size()) return pending;
  Decision d = pending;
  const size_t i = d.webhook->guard;
  ChainState st = *d.webhook->state;
  d.webhook.reset();
  GuardResult r = guards_[i]->checkWebhookAnswer(outcome);
  r.wants_webhook = false;  // one call per guard and text: an answer cannot ask again
  for (auto& e : r.edits) st.edits.push_back(std::move(e));
  r.edits.clear();
  if (r.action != Action::kAllow) {
    Verdict v = finalize(*guards_[i], std::move(r));
    if (v.action == Action::kDeny) {
      applyDenial(d, std::move(v));
      return d;
    }
    d.actions.push_back(v);
    if (v.action == Action::kWarn) d.warnings.push_back(std::move(v));
  }
  return runChain(analysis, sql, ctx, stats, std::move(d), std::move(st));
}

std::optional<std::string> doorRowCap(const Decision& d, const analysis::Analysis& analysis,
                                      std::string_view sql, int64_t max_rows) {
  if (max_rows < 0 || d.denied || (d.max_rows >= 0 && d.max_rows <= max_rows)) return std::nullopt;
  // The door's edits first: where a guard's LIMIT edit is at the same place, the door's wins.
  TextEdits edits;
  for (const auto& st : analysis.statements) {
    if (st.kind != analysis::StatementKind::kSelect || !st.returns_rows) continue;
    if (st.limit == analysis::LimitKind::kConstant && st.limit_value <= max_rows) continue;
    if (auto e = rowCapEdit(st, max_rows + 1)) edits.push_back(std::move(*e));
  }
  if (edits.empty()) return std::nullopt;
  for (const auto& e : d.edits) edits.push_back(e);
  return applyEdits(sql, 0, edits);
}

void applyDenial(Decision& d, Verdict v) {
  d.actions.push_back(v);
  d.denied = true;
  d.deny = std::move(v);
  d.rewritten_sql.reset();
  d.edits.clear();
  d.max_rows = -1;
  d.truncation_notice.clear();
  d.truncation = Verdict{};
  d.explain_sql.reset();
  d.explain_needs_params = false;
  d.plan_guards.clear();
}

Verdict PolicyGroup::renderOutside(std::string_view kind, GuardResult r) const {
  return finalize(kind, false, std::move(r));
}

Verdict PolicyGroup::render(size_t index, GuardResult r) const {
  if (index >= guards_.size()) {
    Verdict v;
    v.action = r.action;
    v.code = r.code;
    v.message = r.message;
    return v;
  }
  return finalize(*guards_[index], std::move(r));
}

Decision PolicyGroup::evaluatePlan(const Decision& pending, std::string_view plan_json,
                                   const analysis::TableStatsSnapshot* stats) const {
  const auto visible = masking_ ? masking_->visibleStats(stats) : nullptr;
  if (visible) stats = visible.get();
  auto plan = analysis::parsePlanJson(plan_json);
  if (!plan.ok()) return planUnavailable(pending);
  Decision d = pending;
  d.explain_sql.reset();
  d.explain_needs_params = false;
  d.estimated_rows = plan->plan_rows;
  const PlanInput in{*plan, stats, *settings_};
  for (size_t i : pending.plan_guards) {
    if (i >= guards_.size()) continue;
    GuardResult r = guards_[i]->checkPlan(in);
    if (r.action == Action::kAllow) continue;
    Verdict v = finalize(*guards_[i], std::move(r));
    if (v.action == Action::kDeny) {
      applyDenial(d, std::move(v));
      break;
    }
    d.actions.push_back(v);
    if (v.action == Action::kWarn) d.warnings.push_back(std::move(v));
  }
  d.plan_guards.clear();
  return d;
}

Decision PolicyGroup::planUnavailable(const Decision& pending) const {
  Decision d = pending;
  d.explain_sql.reset();
  d.explain_needs_params = false;
  for (size_t i : pending.plan_guards) {
    if (i >= guards_.size()) continue;
    GuardResult r = guards_[i]->planUnavailable();
    if (r.action == Action::kAllow) continue;
    Verdict v = finalize(*guards_[i], std::move(r));
    if (v.action == Action::kDeny) {
      applyDenial(d, std::move(v));
      break;
    }
    d.actions.push_back(v);
    if (v.action == Action::kWarn) d.warnings.push_back(std::move(v));
  }
  d.plan_guards.clear();
  return d;
}

Verdict syntaxErrorVerdict(const analysis::Analysis& analysis, std::string_view sql) {
  Verdict v;
  v.guard = "parser";
  v.action = Action::kDeny;
  // A text that is not valid UTF-8 gets the server's own answer (22021); anything else the
  // parser refuses is a syntax error, or the limit or failure it met, under its SQLSTATE.
  const bool encoding = analysis.error_sqlstate == codes::kSqlstateCharacterNotInRepertoire;
  v.code = std::string(encoding ? codes::kInvalidEncoding : codes::kSyntaxError);
  v.sqlstate = analysis.error_sqlstate.empty() ? std::string(codes::kSqlstateSyntax)
                                               : analysis.error_sqlstate;
  v.message = analysis.error.empty() ? "syntax error" : analysis.error;
  v.position = analysis.error_position;
  Facts facts;
  std::string next = encoding ? "send the text as UTF-8" : "fix the SQL and send it again";
  if (analysis.error_position > 0) {
    facts.add("position", static_cast<int64_t>(analysis.error_position));
    next = "fix the SQL near position " + std::to_string(analysis.error_position) + " and send it again";
  }
  facts.add("next_step", next);
  v.detail = facts.json(v.code);
  if (analysis.error_position > 0 && !sql.empty()) {
    // The position counts characters; step over UTF-8 continuation bytes to find the byte.
    size_t byte = 0;
    int chars = 1;
    while (byte < sql.size() && chars < analysis.error_position) {
      ++byte;
      while (byte < sql.size() && (static_cast<unsigned char>(sql[byte]) & 0xC0) == 0x80) ++byte;
      ++chars;
    }
    size_t from = byte > 30 ? byte - 30 : 0;
    while (from < byte && (static_cast<unsigned char>(sql[from]) & 0xC0) == 0x80) ++from;
    v.hint = "The error is near: " + util::excerpt(sql.substr(from, std::min<size_t>(60, sql.size() - from)), 60);
  }
  return v;
}

}  // namespace pgwarden::guards
