// PolicyEngine: Analyzer (one per loop, bounded cache) + PolicyGroup::evaluate, and the
// per-statement facts history needs, cut to the configured text limit.
#include "session/statement_policy.h"

#include "common/lru_map.h"
#include "common/shared_spares.h"
#include "guards/masking.h"
#include "history/json.h"
#include "history/text.h"

namespace pgwarden::session {

namespace {

void cutSql(std::string_view text, size_t max_bytes, PlannedStatement& st) {
  // Leading whitespace is noise in a record.
  while (!text.empty() && (text.front() == ' ' || text.front() == '\n' || text.front() == '\t' ||
                           text.front() == '\r')) {
    text.remove_prefix(1);
  }
  if (max_bytes > 0 && text.size() > max_bytes) {
    size_t cut = max_bytes;
    // Do not split a UTF-8 sequence.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    st.sql.assign(text.substr(0, cut));
    st.sql_truncated = true;
  } else {
    st.sql.assign(text);
    st.sql_truncated = false;
  }
}

// A statement's text with its constants replaced by $n (pg_query_normalize), cut to the history
// limit; the note history keeps for a text that does not parse.
std::string historySqlWithoutConstants(std::string_view text, size_t max_bytes) {
  auto normalized = history::normalizeSql(std::string(text));
  if (!normalized.ok()) return std::string(history::kRedactedUnparsable);
  PlannedStatement cut;
  cutSql(*normalized, max_bytes, cut);
  return std::move(cut.sql);
}

}  // namespace

void assignActionsJson(std::string& out, const std::vector<guards::Verdict>& actions) {
  out.clear();
  if (actions.empty()) {
    out.append("[]");
    return;
  }
  size_t size = 2;
  for (const auto& v : actions) size += 48 + v.guard.size() + v.code.size() + v.message.size();
  out.reserve(size + size / 8);  // room for a few escapes
  out.push_back('[');
  for (size_t i = 0; i < actions.size(); ++i) {
    const auto& v = actions[i];
    if (i) out.push_back(',');
    out += "{\"guard\":";
    history::appendJsonString(out, v.guard);
    out += ",\"action\":";
    history::appendJsonString(out, guards::actionName(v.action));
    out += ",\"code\":";
    history::appendJsonString(out, v.code);
    out += ",\"reason\":";
    history::appendJsonString(out, v.message);
    out.push_back('}');
  }
  out.push_back(']');
}

std::string actionsJson(const std::vector<guards::Verdict>& actions) {
  std::string out;
  assignActionsJson(out, actions);
  return out;
}

// The last actions written as JSON, and the text: a shape's texts get the same actions statement
// after statement, and comparing four short strings a verdict costs less than escaping them
// again. Lists longer than kMaxActions or texts over kMaxJson are written, not remembered.
class ActionsJsonMemo {
 public:
  explicit ActionsJsonMemo(bool on) : on_(on) {}

  void assign(std::string& out, const std::vector<guards::Verdict>& actions) {
    if (on_ && !keys_.empty() && same(actions)) {
      out.assign(json_);
      return;
    }
    assignActionsJson(out, actions);
    if (!on_ || actions.empty() || actions.size() > kMaxActions || out.size() > kMaxJson) return;
    keys_.resize(actions.size());
    for (size_t i = 0; i < actions.size(); ++i) {
      keys_[i].guard.assign(actions[i].guard);
      keys_[i].action = actions[i].action;
      keys_[i].code.assign(actions[i].code);
      keys_[i].message.assign(actions[i].message);
    }
    json_.assign(out);
  }

 private:
  static constexpr size_t kMaxActions = 8;
  static constexpr size_t kMaxJson = 4096;
  // What the JSON holds of a verdict.
  struct Key {
    std::string guard;
    guards::Action action = guards::Action::kAllow;
    std::string code;
    std::string message;
  };

  bool same(const std::vector<guards::Verdict>& actions) const {
    if (actions.size() != keys_.size()) return false;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Key& k = keys_[i];
      const guards::Verdict& v = actions[i];
      if (k.action != v.action || k.code != v.code || k.guard != v.guard ||
          k.message != v.message) {
        return false;
      }
    }
    return true;
  }

  const bool on_;
  std::vector<Key> keys_;  // empty: nothing remembered
  std::string json_;
};


struct PolicyEngine::Impl {
  Impl(size_t cache, size_t max_sql)
      : analyzer(cache), max_sql_bytes(max_sql), plans(cache ? kPlanCacheEntries : 0),
        blind(cache ? kPlanCacheEntries : 0), actions_json(cache != 0) {}
  // `by_shape`: the group is deterministic and the plan could be kept, so the chain's
  // literal-blind guards may be judged once per shape (see `blind` below); `shaped` comes back
  // true when they were skipped.
  std::shared_ptr<const StatementPlan> build(const guards::PolicyGroup* group, std::string_view sql,
                                             const guards::RequestContext& ctx,
                                             const analysis::TableStatsSnapshot* stats,
                                             bool by_shape, bool& shaped);
  // The shapes whose literal-blind guards had nothing to say about a text of theirs, judged by a
  // group, keyed by (group id, snapshot generation, template id): they read nothing that
  // differs between the template's texts (Guard::literalBlind), so they would say nothing about
  // the next one either, and the chain runs without them (PolicyGroup::BlindGuards).
  void judgeByShape(const guards::PolicyGroup& group, const analysis::Analysis& a,
                    std::string_view sql, const guards::RequestContext& ctx,
                    const analysis::TableStatsSnapshot* stats, uint64_t shape,
                    guards::Decision& d, bool& shaped);
  analysis::Analyzer analyzer;
  size_t max_sql_bytes;
  // Plans of deterministic groups, keyed by (group id, snapshot generation, text): `key` is the
  // lookup's scratch, so a hit allocates nothing.
  LruMap<std::shared_ptr<const StatementPlan>> plans;
  // The last plans built, refilled once no one holds them (SharedSpares): as many as the
  // analyzer keeps analyses (analysis/shape_template.cpp), one per statement in flight.
  SharedSpares<StatementPlan, 32> spares;
  // A plan is kept the second time its key is seen: a text with a fresh literal each time
  // (pgbench's simple mode, most agents' reads) costs no insertion and holds no analysis, which
  // the analyzer could otherwise refill for the next text.
  SeenKeys seen{kPlanCacheEntries * 4};
  std::string key;
  LruMap<bool> blind;
  std::string blind_key;
  ActionsJsonMemo actions_json;
  uint64_t plan_hits = 0;
  uint64_t plan_misses = 0;
  uint64_t plan_shapes = 0;
};

PolicyEngine::PolicyEngine(size_t cache_entries, size_t max_sql_bytes)
    : impl_(std::make_unique<Impl>(cache_entries, max_sql_bytes)) {}

PolicyEngine::~PolicyEngine() = default;

std::shared_ptr<const StatementPlan> PolicyEngine::localPlan(std::string_view sql,
                                                            std::string_view kind) const {
  auto plan = std::make_shared<StatementPlan>();
  PlannedStatement ps;
  ps.kind = std::string(kind);
  ps.intent = "admin";
  cutSql(sql, impl_->max_sql_bytes, ps);
  plan->statements.push_back(std::move(ps));
  plan->guard_actions_json = "[]";
  return plan;
}

std::shared_ptr<const StatementPlan> PolicyEngine::unjudgedPlan(std::string_view sql) {
  auto p = plan(nullptr, sql, guards::RequestContext{}, nullptr);
  if (!p->decision.denied) return p;
  return withDecision(*p, guards::Decision{});
}

uint64_t PolicyEngine::cacheHits() const { return impl_->analyzer.cacheHits(); }
uint64_t PolicyEngine::cacheMisses() const { return impl_->analyzer.cacheMisses(); }
uint64_t PolicyEngine::planCacheHits() const { return impl_->plan_hits; }
uint64_t PolicyEngine::planCacheMisses() const { return impl_->plan_misses; }
uint64_t PolicyEngine::planShapeHits() const { return impl_->plan_shapes; }
size_t PolicyEngine::planCacheSize() const { return impl_->plans.size(); }

std::shared_ptr<const StatementPlan> PolicyEngine::withDecision(const StatementPlan& plan,
                                                                guards::Decision decision) {
  auto out = std::make_shared<StatementPlan>(plan);
  out->decision = std::move(decision);
  out->budget = out->decision.denied && out->decision.deny.guard == "budget";
  out->guard_actions_json = actionsJson(out->decision.actions);
  return out;
}

std::shared_ptr<const StatementPlan> PolicyEngine::plan(const guards::PolicyGroup* group,
                                                        std::string_view sql,
                                                        const guards::RequestContext& ctx,
                                                        const analysis::TableStatsSnapshot* stats) {
  Impl& c = *impl_;
  // A deterministic group decides a text the same way every time over the same snapshot (no
  // guard reads the clock, a script, a service, a budget or the caller), so its plan is kept.
  // Without a group nothing is judged, and the snapshot does not matter.
  // A tool's own result_assertions make its plan differ from the same text's elsewhere.
  const bool cacheable =
      (!group || group->deterministic()) && sql.size() <= kPlanCacheMaxText &&
      c.plans.capacity() > 0 &&
      !(group && !ctx.tool.empty() && guards::hasToolAssertions(group->settings()));
  bool shaped = false;
  if (!cacheable) return c.build(group, sql, ctx, stats, false, shaped);
  const uint64_t ids[3] = {group ? group->id() : 0, group && stats ? stats->generation() : 0,
                           ctx.inferred_params ? 1u : 0u};
  c.key.assign(reinterpret_cast<const char*>(ids), sizeof ids);
  c.key.append(sql);
  const size_t hash = StringViewHash{}(c.key);  // once, for the lookup and the admission
  if (auto* hit = c.plans.find(c.key, hash)) {
    ++c.plan_hits;
    return hit->value;
  }
  auto plan = c.build(group, sql, ctx, stats, true, shaped);
  ++(shaped ? c.plan_shapes : c.plan_misses);
  if (c.seen.seenBefore(hash)) c.plans.insert(c.key, plan, hash);
  return plan;
}

void PolicyEngine::Impl::judgeByShape(const guards::PolicyGroup& group,
                                      const analysis::Analysis& a, std::string_view sql,
                                      const guards::RequestContext& ctx,
                                      const analysis::TableStatsSnapshot* stats, uint64_t shape,
                                      guards::Decision& d, bool& shaped) {
  const uint64_t ids[3] = {group.id(), stats ? stats->generation() : 0, shape};
  blind_key.assign(reinterpret_cast<const char*>(ids), sizeof ids);
  guards::PolicyGroup::BlindGuards b;
  // Only shapes whose blind guards were found quiet are kept: a chain that stopped before them
  // (a guard that reads literals refused this text) says nothing of them, and one they objected
  // to is judged in full every time anyway.
  b.skip = blind.find(blind_key) != nullptr;
  group.evaluate(a, sql, ctx, stats, d, b);
  shaped = b.skip;
  if (!b.skip && b.clean) blind.insert(blind_key, true);
}

std::shared_ptr<const StatementPlan> PolicyEngine::Impl::build(
    const guards::PolicyGroup* group, std::string_view sql, const guards::RequestContext& ctx,
    const analysis::TableStatsSnapshot* stats, bool by_shape, bool& shaped) {
  // A plan no one holds any more is refilled in place: its strings and vectors keep their
  // storage. Its old analysis goes first, so the analyzer may refill that one too. Only plans of
  // texts the plan cache would keep are kept as spares, so what they hold on to stays small.
  std::shared_ptr<StatementPlan> plan =
      sql.size() <= kPlanCacheMaxText ? spares.take() : std::make_shared<StatementPlan>();
  plan->analysis.reset();
  uint64_t shape = 0;
  plan->analysis = analyzer.analyze(sql, shape);
  const analysis::Analysis& a = *plan->analysis;
  plan->fingerprint.assign(a.fingerprint_hex);
  if (!a.ok) {
    // Text the parser rejects never reaches the server: PostgreSQL would refuse it anyway, and
    // a guard cannot vouch for what it cannot read.
    guards::Verdict v = guards::syntaxErrorVerdict(a, sql);
    if (v.position == 0) v.position = a.error_position;
    plan->decision = guards::Decision{};
    guards::applyDenial(plan->decision, std::move(v));
  } else if (group && by_shape && shape != 0 && group->literalBlindGuards() > 0) {
    judgeByShape(*group, a, sql, ctx, stats, shape, plan->decision, shaped);
  } else if (group) {
    group->evaluate(a, sql, ctx, stats, plan->decision);
  } else {
    plan->decision = guards::Decision{};
  }
  plan->budget = plan->decision.denied && plan->decision.deny.guard == "budget";
  actions_json.assign(plan->guard_actions_json, plan->decision.actions);

  const guards::Masking* masking = group ? group->masking() : nullptr;
  plan->history_sql.clear();
  if (!a.ok || a.statements.empty()) {
    plan->statements.resize(1);
    PlannedStatement& ps = plan->statements.front();
    ps.kind.clear();
    ps.intent.clear();
    ps.tables.clear();
    ps.checks.clear();
    cutSql(sql, max_sql_bytes, ps);
    // Constants pgwarden cannot tell from the rest may be masked values: none of it is kept.
    if (masking && !a.ok) plan->history_sql.emplace_back(history::kRedactedUnparsable);
    return plan;
  }
  plan->statements.resize(a.statements.size());
  for (size_t i = 0; i < a.statements.size(); ++i) {
    const analysis::StatementInfo& s = a.statements[i];
    PlannedStatement& ps = plan->statements[i];
    ps.kind.assign(analysis::kindName(s.kind));
    ps.intent.assign(analysis::intentName(s.intent));
    ps.tables.resize(s.relations.size());
    for (size_t t = 0; t < s.relations.size(); ++t) {
      const analysis::RelationRef& r = s.relations[t];
      std::string& name = ps.tables[t];
      name.clear();
      if (!r.schema.empty()) name.append(r.schema).push_back('.');
      name.append(r.name);
    }
    const size_t loc = std::min(static_cast<size_t>(std::max(s.location, 0)), sql.size());
    const size_t len = s.length > 0 ? std::min(static_cast<size_t>(s.length), sql.size() - loc)
                                    : sql.size() - loc;
    cutSql(sql.substr(loc, len), max_sql_bytes, ps);
    if (masking && masking->constantsMayBeValues(s.relations, stats)) {
      plan->history_sql.resize(a.statements.size());
      plan->history_sql[i] = historySqlWithoutConstants(sql.substr(loc, len), max_sql_bytes);
    }
    ps.checks.clear();
    // A masking group's rows are checked before their masked values are replaced, and a
    // breach names the value: its result_assertions are not checked.
    if (group && !group->masking()) guards::assertionChecks(group->settings(), s, ctx.tool, ps.checks);
  }
  return plan;
}

}  // namespace pgwarden::session
