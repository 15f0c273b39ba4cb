// session: the policy engine's plan cache must never change a decision. Every statement of the
// security corpora and of the ordinary reads goes through an engine that keeps plans, twice (the
// second time from the cache), and through one that keeps none; each plan must equal the
// uncached one field for field, for every group of the example config. A group with a guard that
// is not deterministic (a script, a service, a budget, anything that reads who is asking or the
// clock) is judged afresh every time; a reload's new group and a refreshed catalog snapshot never
// reuse an older plan; a text is kept the second time it is seen; the cache stays within its
// bounds.
#include <set>

#include "analysis/shape.h"
#include "analysis/shape_template.h"
#include "guards/guard.h"
#include "session/statement_policy.h"
#include "tests/unit/guards/guard_test_util.h"
#include "tests/unit/session/session_test_util.h"

namespace pgwarden::daemon {
namespace {

namespace gt = guards::test;

void expectSameVerdict(const guards::Verdict& a, const guards::Verdict& b) {
  EXPECT_EQ(a.guard, b.guard);
  EXPECT_EQ(a.action, b.action);
  EXPECT_EQ(a.code, b.code);
  EXPECT_EQ(a.sqlstate, b.sqlstate);
  EXPECT_EQ(a.message, b.message);
  EXPECT_EQ(a.detail, b.detail);
  EXPECT_EQ(a.hint, b.hint);
  EXPECT_EQ(a.position, b.position);
}

void expectSameVerdicts(const std::vector<guards::Verdict>& a,
                        const std::vector<guards::Verdict>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) expectSameVerdict(a[i], b[i]);
}

void expectSamePlan(const session::StatementPlan& got, const session::StatementPlan& want) {
  const auto& g = got.decision;
  const auto& w = want.decision;
  EXPECT_EQ(g.denied, w.denied);
  if (g.denied && w.denied) expectSameVerdict(g.deny, w.deny);
  expectSameVerdicts(g.warnings, w.warnings);
  expectSameVerdicts(g.actions, w.actions);
  EXPECT_EQ(g.rewritten_sql, w.rewritten_sql);
  EXPECT_EQ(g.max_rows, w.max_rows);
  EXPECT_EQ(g.truncation_notice, w.truncation_notice);
  if (g.max_rows >= 0) expectSameVerdict(g.truncation, w.truncation);
  EXPECT_EQ(g.explain_sql, w.explain_sql);
  EXPECT_EQ(g.explain_needs_params, w.explain_needs_params);
  EXPECT_EQ(g.plan_guards, w.plan_guards);
  EXPECT_EQ(g.webhook.has_value(), w.webhook.has_value());
  EXPECT_EQ(got.fingerprint, want.fingerprint);
  EXPECT_EQ(got.guard_actions_json, want.guard_actions_json);
  EXPECT_EQ(got.budget, want.budget);
  ASSERT_EQ(got.statements.size(), want.statements.size());
  for (size_t i = 0; i < got.statements.size(); ++i) {
    EXPECT_EQ(got.statements[i].kind, want.statements[i].kind);
    EXPECT_EQ(got.statements[i].intent, want.statements[i].intent);
    EXPECT_EQ(got.statements[i].tables, want.statements[i].tables);
    EXPECT_EQ(got.statements[i].sql, want.statements[i].sql);
    EXPECT_EQ(got.statements[i].sql_truncated, want.statements[i].sql_truncated);
  }
}

// A Query, or a Parse as pgbench and most drivers send it: no parameter type declared.
guards::RequestContext contextFor(const guards::PolicyGroup* group, bool extended,
                                  std::string_view user) {
  guards::RequestContext ctx;
  ctx.user = user;
  ctx.group = group ? std::string_view(group->name()) : std::string_view();
  ctx.extended = extended;
  ctx.inferred_params = true;
  return ctx;
}

// The sample catalog, and pgbench_accounts and fct_shipments as PostgreSQL describes them: a
// primary key on aid and on id, no inheritance children, so reads by those keys need no LIMIT.
std::shared_ptr<const analysis::TableStatsSnapshot> keyedStats() {
  auto key = [](const char* table, const char* column) {
    return std::vector<std::string>{"public", table, column, "bigint", "N", "", "", "", "", "-1", "", "true",
                                    "true"};
  };
  return analysis::TableStatsSnapshot::fromRows(
      {{"public", "fct_shipments", "1000000", "ship_date,id", "date,bigint", "16400", "{}", "r", "false"},
       {"public", "dim_region", "12", "region", "text"},
       {"public", "pgbench_accounts", "100000", "aid", "integer", "16401", "{}", "r", "false"}},
      {key("fct_shipments", "id"), key("pgbench_accounts", "aid")});
}

std::vector<std::string> corpusTexts() {
  std::vector<std::string> texts = gt::allCorpusStatements();
  // pgbench's texts, and ones that differ from a cached one only by a literal or a space.
  for (const char* s :
       {"SELECT abalance FROM pgbench_accounts WHERE aid = $1;",
        "SELECT abalance FROM pgbench_accounts WHERE aid = 1;",
        "SELECT abalance FROM pgbench_accounts WHERE aid = 2;",
        "SELECT * FROM fct_shipments WHERE id = 5 LIMIT 10",
        "SELECT * FROM fct_shipments WHERE id = 5 LIMIT 100000",
        "SELECT * FROM fct_shipments WHERE 1 = 1", "SELECT * FROM fct_shipments WHERE 1 = 2",
        "SELECT * FROM fct_shipments  WHERE 1 = 1", "SELECT pg_sleep(1)", "SELECT pg_sleep(1000)",
        "SELEC 1", ""}) {
    texts.emplace_back(s);
  }
  return texts;
}

TEST(PlanCache, CachedPlansEqualUncachedOnesForEveryCorpusText) {
  const auto texts = corpusTexts();
  ASSERT_GE(texts.size(), 150u);
  const auto stats = keyedStats();
  session::PolicyEngine cached(4096, 200);
  session::PolicyEngine uncached(0, 200);  // no caches at all: every plan built from a fresh parse
  size_t deterministic_groups = 0;
  for (const auto& [name, group] : gt::exampleGroups()) {
    if (!group->deterministic()) continue;
    ++deterministic_groups;
    for (const auto& sql : texts) {
      for (bool extended : {false, true}) {
        SCOPED_TRACE(name + (extended ? " extended: " : " simple: ") + sql);
        // The second time a text is seen its plan is kept; a third caller (another user, the
        // other protocol) gets the very same plan.
        const auto first =
            cached.plan(group.get(), sql, contextFor(group.get(), extended, "agent"), stats.get());
        const auto second =
            cached.plan(group.get(), sql, contextFor(group.get(), extended, "agent"), stats.get());
        const auto again =
            cached.plan(group.get(), sql, contextFor(group.get(), !extended, "other"), stats.get());
        EXPECT_EQ(second.get(), again.get());
        const auto fresh = uncached.plan(group.get(), sql,
                                         contextFor(group.get(), extended, "agent"), stats.get());
        expectSamePlan(*first, *fresh);
        expectSamePlan(*again, *fresh);
      }
    }
  }
  EXPECT_GE(deterministic_groups, 2u);
  EXPECT_EQ(uncached.planCacheHits(), 0u);
  // Each text missed twice per group (seen, then kept); the four calls after that were hits.
  // Texts that repeat (the corpora share a few) only hit more.
  EXPECT_GE(cached.planCacheHits(), cached.planCacheMisses() * 2);
}

// The shapes' literal variants: each corpus text with a literal, then texts of its shape with
// other values (the shape template's own probes, rounds the template never used), so that the
// shape gets a template and its later texts are judged by shape.
std::vector<std::vector<std::string>> shapeRuns(const std::vector<std::string>& texts) {
  std::vector<std::vector<std::string>> runs;
  for (const auto& sql : texts) {
    analysis::Shape shape;
    if (!analysis::lexShape(sql, shape) || shape.literals.empty()) continue;
    std::vector<std::string> run{sql};
    for (int round = 2; round < 8; ++round) {
      std::string v;
      if (analysis::shapeProbeText(sql, shape, round, v)) run.push_back(std::move(v));
    }
    runs.push_back(std::move(run));
  }
  // Same shape, a literal a guard reads on either side of its limit: the literal-blind guards
  // are judged by shape, but these guards run for every text.
  runs.push_back({"SELECT * FROM fct_shipments WHERE id > 5 LIMIT 200",
                  "SELECT * FROM fct_shipments WHERE id > 6 LIMIT 300",
                  "SELECT * FROM fct_shipments WHERE id > 7 LIMIT 400",
                  "SELECT * FROM fct_shipments WHERE id > 8 LIMIT 500",
                  "SELECT * FROM fct_shipments WHERE id > 9 LIMIT 100000",
                  "SELECT * FROM fct_shipments WHERE id > 10 LIMIT 900"});
  runs.push_back({"SELECT g FROM generate_series(1, 200) g", "SELECT g FROM generate_series(1, 300) g",
                  "SELECT g FROM generate_series(1, 400) g", "SELECT g FROM generate_series(1, 500) g",
                  "SELECT g FROM generate_series(1, 900000000) g",
                  "SELECT g FROM generate_series(1, 600) g"});
  runs.push_back({"SELECT pg_sleep(100)", "SELECT pg_sleep(200)", "SELECT pg_sleep(300)",
                  "SELECT pg_sleep(400)", "SELECT pg_sleep(500)"});
  runs.push_back({"SELECT set_config('application_name', 'a', false)",
                  "SELECT set_config('application_name', 'b', false)",
                  "SELECT set_config('application_name', 'c', false)",
                  "SELECT set_config('statement_timeout', '0', false)",
                  "SELECT set_config('application_name', 'd', false)"});
  return runs;
}

// Judging by shape must never change a decision: every text of every run, through an engine
// that judges by shape, equals the plan of an engine that keeps nothing, for every deterministic
// group of the example config; and it happens (the pgbench text's shape is judged so).
TEST(PlanCache, PlansJudgedByShapeEqualUncachedOnes) {
  const auto runs = shapeRuns(corpusTexts());
  ASSERT_GE(runs.size(), 60u);
  const auto stats = keyedStats();
  size_t compared = 0;
  for (const auto& [name, group] : gt::exampleGroups()) {
    if (!group->deterministic()) continue;
    session::PolicyEngine shaped(4096, 200);
    session::PolicyEngine uncached(0, 200);
    for (const auto& run : runs) {
      for (const auto& sql : run) {
        SCOPED_TRACE(name + ": " + sql);
        const auto ctx = contextFor(group.get(), false, "agent");
        const auto got = shaped.plan(group.get(), sql, ctx, stats.get());
        const auto want = uncached.plan(group.get(), sql, ctx, stats.get());
        expectSamePlan(*got, *want);
        ++compared;
      }
    }
    if (group->literalBlindGuards() > 0) {
      EXPECT_GT(shaped.planShapeHits(), runs.size() / 2) << name;
    }
    EXPECT_EQ(uncached.planShapeHits(), 0u);
  }
  EXPECT_GE(compared, 500u);
}

// The shape's memory is the group's, over one snapshot: another group's guards, or a refreshed
// snapshot, judge the shape afresh; and a shape whose literal-blind guards objected once is
// judged in full every time.
TEST(PlanCache, AShapeIsJudgedAfreshByAnotherGroupOrSnapshotOrAfterAnObjection) {
  const auto groups = gt::groupsFromYaml(
      "open:\n  guards:\n    - kind: read_only\n    - kind: row_limit\n      max_rows: 10\n"
      "closed:\n  guards:\n    - kind: tables\n      deny: [public.fct_shipments]\n"
      "    - kind: row_limit\n      max_rows: 10\n");
  const auto* open = groups.at("open").get();
  const auto* closed = groups.at("closed").get();
  const auto stats = gt::sampleStats();
  session::PolicyEngine engine(4096, 200);
  auto text = [](int n) { return "SELECT * FROM fct_shipments WHERE id > " + std::to_string(n); };
  for (int n = 100; n < 110; ++n) {
    const auto p = engine.plan(open, text(n), contextFor(open, false, "agent"), stats.get());
    EXPECT_FALSE(p->decision.denied);
    EXPECT_EQ(p->decision.max_rows, 10);
  }
  const uint64_t by_shape = engine.planShapeHits();
  EXPECT_GE(by_shape, 5u);
  for (int n = 200; n < 210; ++n) {
    const auto p = engine.plan(closed, text(n), contextFor(closed, false, "agent"), stats.get());
    EXPECT_TRUE(p->decision.denied) << text(n);
  }
  EXPECT_EQ(engine.planShapeHits(), by_shape);
  const auto refreshed = gt::sampleStats();
  (void)engine.plan(open, text(300), contextFor(open, false, "agent"), refreshed.get());
  EXPECT_EQ(engine.planShapeHits(), by_shape);
  (void)engine.plan(open, text(301), contextFor(open, false, "agent"), refreshed.get());
  EXPECT_EQ(engine.planShapeHits(), by_shape + 1);

  // A text a guard that reads literals refuses before the blind ones ran says nothing of them:
  // the shape is judged by shape once a text of it gets through to them.
  const auto limited = gt::groupsFromYaml(
      "first:\n  guards:\n    - kind: row_limit\n      max_limit: 200\n    - kind: read_only\n");
  const auto* first = limited.at("first").get();
  auto capped = [](int n, int limit) {
    return "SELECT * FROM fct_shipments WHERE id > " + std::to_string(n) + " LIMIT " +
           std::to_string(limit);
  };
  for (int n = 400; n < 404; ++n) {
    EXPECT_TRUE(engine.plan(first, capped(n, 500), contextFor(first, false, "agent"), stats.get())
                    ->decision.denied);
  }
  const uint64_t before_pass = engine.planShapeHits();
  for (int n = 500; n < 504; ++n) {
    EXPECT_FALSE(engine.plan(first, capped(n, 150), contextFor(first, false, "agent"), stats.get())
                     ->decision.denied);
  }
  EXPECT_EQ(engine.planShapeHits(), before_pass + 3);
}

// A guard whose answer changes every time it is asked: it stands for a script, a service or a
// budget, whose answers depend on more than the text.
class CountingGuard : public guards::Guard {
 public:
  std::string_view kind() const override { return "counting"; }
  std::vector<std::string_view> codes() const override { return {"*"}; }
  guards::GuardResult checkText(const guards::GuardInput& in) const override {
    ++calls;
    guards::GuardResult r;
    if (in.ctx.user == "mallory" || calls % 2 == 0) {
      r.action = guards::Action::kDeny;
      r.code = "COUNTED";
      r.sqlstate = "42501";
      r.message = "call " + std::to_string(calls);
    }
    return r;
  }
  mutable int calls = 0;
};

TEST(PlanCache, GroupsWithAGuardThatIsNotDeterministicAreJudgedEveryTime) {
  std::vector<std::unique_ptr<guards::Guard>> list;
  list.push_back(std::make_unique<CountingGuard>());
  const auto* counting = static_cast<const CountingGuard*>(list.back().get());
  const guards::PolicyGroup group("counted", std::move(list), {"public"});
  EXPECT_FALSE(group.deterministic());
  session::PolicyEngine engine(4096, 200);
  const auto stats = gt::sampleStats();
  const std::string sql = "SELECT id FROM fct_shipments WHERE id = 1";
  const auto a = engine.plan(&group, sql, contextFor(&group, false, "agent"), stats.get());
  const auto b = engine.plan(&group, sql, contextFor(&group, false, "agent"), stats.get());
  const auto c = engine.plan(&group, sql, contextFor(&group, false, "mallory"), stats.get());
  EXPECT_EQ(counting->calls, 3);
  EXPECT_FALSE(a->decision.denied);
  EXPECT_TRUE(b->decision.denied);
  EXPECT_TRUE(c->decision.denied);
  EXPECT_EQ(engine.planCacheHits(), 0u);
  EXPECT_EQ(engine.planCacheSize(), 0u);

  // The kinds that read more than the text say so: every agent kind but the built-in ones.
  const auto groups = test::groupsFromYaml(
      "scripted:\n  guards:\n    - kind: lua\n      script: |\n        function check(ctx) return "
      "nil end\n"
      "budgeted:\n  guards:\n    - kind: read_only\n    - kind: budget\n      max_statements: 5\n"
      "hooked:\n  guards:\n    - kind: http_webhook\n      url: http://127.0.0.1:9/check\n"
      "builtin:\n  guards:\n    - kind: read_only\n    - kind: row_limit\n      max_rows: 10\n");
  EXPECT_FALSE(groups.at("scripted")->deterministic());
  EXPECT_FALSE(groups.at("budgeted")->deterministic());
  EXPECT_FALSE(groups.at("hooked")->deterministic());
  EXPECT_TRUE(groups.at("builtin")->deterministic());
}

TEST(PlanCache, AReloadedGroupOrARefreshedSnapshotNeverReusesAnOlderPlan) {
  const char* yaml_before = "g:\n  guards:\n    - kind: row_limit\n      max_rows: 10\n";
  const char* yaml_after = "g:\n  guards:\n    - kind: row_limit\n      max_rows: 20\n";
  auto before = gt::groupsFromYaml(yaml_before);
  auto after = gt::groupsFromYaml(yaml_after);
  session::PolicyEngine engine(4096, 200);
  const auto stats = gt::sampleStats();
  const std::string sql = "SELECT * FROM fct_shipments WHERE id > 5";
  const auto* g1 = before.at("g").get();
  const auto* g2 = after.at("g").get();
  EXPECT_NE(g1->id(), g2->id());
  (void)engine.plan(g1, sql, contextFor(g1, false, "agent"), stats.get());
  const auto p1 = engine.plan(g1, sql, contextFor(g1, false, "agent"), stats.get());  // kept
  const auto p2 = engine.plan(g2, sql, contextFor(g2, false, "agent"), stats.get());
  EXPECT_EQ(p1->decision.max_rows, 10);
  EXPECT_EQ(p2->decision.max_rows, 20);
  EXPECT_EQ(engine.planCacheHits(), 0u);

  // A refresh: the same tables, a new snapshot (and a copy with index bounds is new too).
  const auto refreshed = gt::sampleStats();
  EXPECT_NE(refreshed->generation(), stats->generation());
  const auto bounded = refreshed->withIndexBounds({}, nullptr);
  EXPECT_NE(bounded->generation(), refreshed->generation());
  const auto p3 = engine.plan(g1, sql, contextFor(g1, false, "agent"), refreshed.get());
  EXPECT_NE(p3.get(), p1.get());
  const auto p4 = engine.plan(g1, sql, contextFor(g1, false, "agent"), nullptr);
  EXPECT_NE(p4.get(), p1.get());
  EXPECT_EQ(engine.planCacheHits(), 0u);
  EXPECT_EQ(engine.plan(g1, sql, contextFor(g1, false, "agent"), stats.get()).get(), p1.get());
  EXPECT_EQ(engine.planCacheHits(), 1u);
}

// A read keyed by $1 needs no LIMIT only when the server infers $1's type: the same text with a
// declared type is another plan, never the one kept for the other.
TEST(PlanCache, AReadKeyedByAParameterIsPlannedApartForDeclaredAndInferredTypes) {
  const auto groups = gt::groupsFromYaml("g:\n  guards:\n    - kind: row_limit\n      max_rows: 10\n");
  const auto* g = groups.at("g").get();
  session::PolicyEngine engine(4096, 200);
  const auto stats = keyedStats();
  const std::string sql = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
  auto declared = contextFor(g, true, "agent");
  declared.inferred_params = false;
  for (int round = 0; round < 3; ++round) {
    const auto typed = engine.plan(g, sql, declared, stats.get());
    const auto inferred = engine.plan(g, sql, contextFor(g, true, "agent"), stats.get());
    EXPECT_EQ(typed->decision.rewritten_sql, sql + "\nLIMIT 11") << round;
    EXPECT_FALSE(inferred->decision.rewritten_sql.has_value()) << round;
    EXPECT_EQ(typed->decision.max_rows, 10);
    EXPECT_EQ(inferred->decision.max_rows, 10);
  }
  EXPECT_EQ(engine.planCacheHits(), 2u);  // each kept the second time, served the third
}

TEST(PlanCache, StaysWithinItsBounds) {
  const auto groups = gt::groupsFromYaml("g:\n  guards:\n    - kind: read_only\n");
  const auto* g = groups.at("g").get();
  session::PolicyEngine engine(4096, 200);
  // A text seen once is not kept: one-off texts (a fresh literal each time) never fill it.
  for (size_t i = 0; i < session::kPlanCacheEntries + 100; ++i) {
    (void)engine.plan(g, "SELECT " + std::to_string(i), contextFor(g, false, "agent"), nullptr);
  }
  EXPECT_EQ(engine.planCacheSize(), 0u);
  // Each text twice in a row: the second time keeps it.
  for (size_t i = 0; i < session::kPlanCacheEntries + 100; ++i) {
    const std::string sql = "SELECT " + std::to_string(i) + " AS again";
    (void)engine.plan(g, sql, contextFor(g, false, "agent"), nullptr);
    (void)engine.plan(g, sql, contextFor(g, false, "agent"), nullptr);
  }
  EXPECT_EQ(engine.planCacheHits(), 0u);
  EXPECT_EQ(engine.planCacheSize(), session::kPlanCacheEntries);
  // The oldest went first; the newest is still there.
  const uint64_t hits = engine.planCacheHits();
  (void)engine.plan(g, "SELECT 0 AS again", contextFor(g, false, "agent"), nullptr);
  EXPECT_EQ(engine.planCacheHits(), hits);
  (void)engine.plan(g, "SELECT " + std::to_string(session::kPlanCacheEntries + 99) + " AS again",
                    contextFor(g, false, "agent"), nullptr);
  EXPECT_EQ(engine.planCacheHits(), hits + 1);

  // A text over the size cap is judged but never kept.
  std::string big = "SELECT 1 AS a";
  while (big.size() <= session::kPlanCacheMaxText) big += " , 1 AS a";
  const auto a = engine.plan(g, big, contextFor(g, false, "agent"), nullptr);
  const auto b = engine.plan(g, big, contextFor(g, false, "agent"), nullptr);
  EXPECT_NE(a.get(), b.get());
  EXPECT_FALSE(a->decision.denied);
}

}  // namespace
}  // namespace pgwarden::daemon

namespace pgwarden::daemon {
namespace {

// A plan no one holds any more is refilled for the next text: nothing of the last one may show
// through (more statements, tables, a cut text, a denial, a rewrite).
TEST(PlanCache, ARefilledPlanCarriesNothingOfTheLastOne) {
  const auto stats = gt::sampleStats();
  const auto& agents = *gt::exampleGroups().at("agents");
  session::PolicyEngine engine(4096, 24);
  const std::vector<std::string> texts = {
      "SELECT id FROM public.fct_shipments WHERE id = 1; SELECT region FROM dim_region WHERE "
      "region = 'EU'",
      "SELECT 1",
      "SELEC broken",
      "SELECT * FROM fct_shipments WHERE carrier = 'UPS'",
      "DELETE FROM fct_shipments WHERE id = 2",
      "",
      "SELECT a.id FROM fct_shipments a JOIN dim_region r ON r.region = a.region WHERE a.id = 5",
      "SELECT 2",
  };
  for (int round = 0; round < 3; ++round) {
    for (const auto& sql : texts) {
      SCOPED_TRACE(sql);
      // Each text once per round, with a fresh literal-free text in between: never from the
      // plan cache's second sighting, so every plan here is built, most of them over a spare.
      const auto got = engine.plan(&agents, sql + std::string(round, ' '),
                                   contextFor(&agents, false, "agent"), stats.get());
      session::PolicyEngine fresh(0, 24);  // a new engine: its first plan is a new object
      const auto want = fresh.plan(&agents, sql + std::string(round, ' '),
                                   contextFor(&agents, false, "agent"), stats.get());
      expectSamePlan(*got, *want);
    }
  }
}

}  // namespace
}  // namespace pgwarden::daemon
