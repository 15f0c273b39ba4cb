// guards: cost_gate. Reads of a big table ask for EXPLAIN (FORMAT JSON); the plan half refuses a
// Seq Scan of a big table or a cost above max_cost, and fails closed (or open) without a plan.
#include "guards/codes.h"
#include "tests/unit/guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

using test::evaluate;

const PolicyGroup& gated() {
  static const auto groups = test::groupsFromYaml(
      "g:\n  search_path: [public]\n  guards:\n"
      "    - kind: cost_gate\n      tables: [\"public.fct_shipments\"]\n      max_cost: 50000\n"
      "    - kind: row_limit\n      max_rows: 1000\n");
  return *groups.at("g");
}

std::string plan(const std::string& node, const std::string& relation, double cost) {
  return "[{\"Plan\": {\"Node Type\": \"Limit\", \"Startup Cost\": 0.0, \"Total Cost\": " + std::to_string(cost) +
         ", \"Plan Rows\": 1001, \"Plans\": [{\"Node Type\": \"" + node +
         "\", \"Parent Relationship\": \"Outer\", \"Relation Name\": \"" + relation +
         "\", \"Alias\": \"s\", \"Total Cost\": " + std::to_string(cost) + ", \"Plan Rows\": 5000}]}}]";
}

TEST(CostGate, AsksForThePlanOfWhatWillRun) {
  const auto stats = test::sampleStats();
  const Decision d = evaluate(gated(), "SELECT * FROM fct_shipments WHERE status = 'DELAYED';", stats.get());
  ASSERT_FALSE(d.denied);
  ASSERT_TRUE(d.explain_sql.has_value());
  EXPECT_EQ(*d.explain_sql, "EXPLAIN (FORMAT JSON) SELECT * FROM fct_shipments WHERE status = 'DELAYED'\nLIMIT 1001");
  EXPECT_FALSE(d.explain_needs_params);
  EXPECT_EQ(d.max_rows, 1000);
  // The EXPLAIN text is itself a single read the parser accepts.
  const auto a = analysis::analyzeUncached(*d.explain_sql);
  ASSERT_TRUE(a->ok);
  EXPECT_EQ(a->statements.size(), 1u);
  EXPECT_EQ(a->statements[0].kind, analysis::StatementKind::kExplain);
  EXPECT_FALSE(a->statements[0].explain_analyze);
}

TEST(CostGate, ParametersAreFlagged) {
  const Decision d = evaluate(gated(), "SELECT * FROM fct_shipments WHERE ship_date = $1", nullptr, true);
  ASSERT_TRUE(d.explain_sql.has_value());
  EXPECT_TRUE(d.explain_needs_params);
}

TEST(CostGate, SmallOrUnlistedTablesNeedNoPlan) {
  const auto stats = test::sampleStats();
  for (const char* sql : {"SELECT * FROM dim_region", "SELECT 1", "SHOW ALL", "EXPLAIN SELECT * FROM fct_shipments"}) {
    const Decision d = evaluate(gated(), sql, stats.get());
    EXPECT_FALSE(d.explain_sql.has_value()) << sql;
    EXPECT_TRUE(d.plan_guards.empty());
  }
}

TEST(CostGate, SeqScanOfABigTableIsRefused) {
  const auto stats = test::sampleStats();
  const Decision pending = evaluate(gated(), "SELECT * FROM fct_shipments WHERE status = 'DELAYED'", stats.get());
  ASSERT_TRUE(pending.explain_sql.has_value());
  const Decision d = gated().evaluatePlan(pending, plan("Seq Scan", "fct_shipments", 120.5), stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "SEQ_SCAN");
  EXPECT_EQ(d.deny.sqlstate, "54000");
  EXPECT_EQ(d.deny.guard, "cost_gate");
  EXPECT_NE(d.deny.message.find("public.fct_shipments"), std::string::npos) << d.deny.message;
  EXPECT_NE(d.deny.message.find("Seq Scan"), std::string::npos) << d.deny.message;
  EXPECT_NE(d.deny.message.find("ship_date"), std::string::npos) << d.deny.message;
  EXPECT_NE(d.deny.detail.find("\"plan_node\":\"Seq Scan\""), std::string::npos) << d.deny.detail;
  EXPECT_FALSE(d.rewritten_sql.has_value());
  EXPECT_EQ(d.max_rows, -1);
  EXPECT_FALSE(d.explain_sql.has_value());
  EXPECT_EQ(d.actions.back().code, "SEQ_SCAN");
}

TEST(CostGate, IndexScanWithinCostPassesAndKeepsTheRewrite) {
  const auto stats = test::sampleStats();
  const Decision pending = evaluate(gated(), "SELECT * FROM fct_shipments WHERE ship_date = '2024-01-01'", stats.get());
  const Decision d = gated().evaluatePlan(pending, plan("Index Scan", "fct_shipments", 900), stats.get());
  EXPECT_FALSE(d.denied) << d.deny.message;
  EXPECT_FALSE(d.explain_sql.has_value());
  EXPECT_TRUE(d.plan_guards.empty());
  ASSERT_TRUE(d.rewritten_sql.has_value());
  EXPECT_EQ(d.max_rows, 1000);
}

TEST(CostGate, CostAboveTheLimitIsRefused) {
  const auto stats = test::sampleStats();
  const Decision pending = evaluate(gated(), "SELECT * FROM fct_shipments WHERE ship_date > '2020-01-01'", stats.get());
  const Decision d = gated().evaluatePlan(pending, plan("Bitmap Heap Scan", "fct_shipments", 75000), stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "COST_TOO_HIGH");
  EXPECT_NE(d.deny.message.find("75000"), std::string::npos) << d.deny.message;
  EXPECT_NE(d.deny.message.find("50000"), std::string::npos) << d.deny.message;
  EXPECT_NE(d.deny.detail.find("\"plan_node\":\"Bitmap Heap Scan\""), std::string::npos) << d.deny.detail;
}

TEST(CostGate, SmallTableMayScan) {
  const auto stats = test::sampleStats();
  const Decision pending = evaluate(gated(), "SELECT * FROM fct_shipments f JOIN dim_region r ON r.region = f.region WHERE f.ship_date = '2024-01-01'", stats.get());
  const std::string json =
      "[{\"Plan\": {\"Node Type\": \"Hash Join\", \"Total Cost\": 100.0, \"Plan Rows\": 10, \"Plans\": ["
      "{\"Node Type\": \"Index Scan\", \"Relation Name\": \"fct_shipments\", \"Total Cost\": 80.0, \"Plan Rows\": 10},"
      "{\"Node Type\": \"Seq Scan\", \"Relation Name\": \"dim_region\", \"Total Cost\": 1.12, \"Plan Rows\": 12}]}}]";
  EXPECT_FALSE(gated().evaluatePlan(pending, json, stats.get()).denied);
}

TEST(CostGate, BigTablesFromStatistics) {
  const auto stats = test::sampleStats();
  const auto groups = test::groupsFromYaml("g:\n  guards:\n    - kind: cost_gate\n      seq_scan_rows: 500000\n");
  const auto& g = *groups.at("g");
  const Decision pending = evaluate(g, "SELECT count(*) FROM fct_shipments", stats.get());
  ASSERT_TRUE(pending.explain_sql.has_value());
  const Decision d = g.evaluatePlan(pending, plan("Seq Scan", "fct_shipments", 20000), stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "SEQ_SCAN");
  EXPECT_FALSE(evaluate(g, "SELECT count(*) FROM dim_region", stats.get()).explain_sql.has_value());
}

TEST(CostGate, NoPlanFailsClosedByDefault) {
  const auto stats = test::sampleStats();
  const Decision pending = evaluate(gated(), "SELECT * FROM fct_shipments WHERE status = 'X'", stats.get());
  for (const Decision& d : {gated().evaluatePlan(pending, "not json", stats.get()),
                            gated().evaluatePlan(pending, "{\"Plan\": 1}", stats.get()),
                            gated().planUnavailable(pending)}) {
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, "PLAN_UNAVAILABLE");
    EXPECT_EQ(d.deny.sqlstate, "58000");
    EXPECT_NE(d.deny.message.find("retry"), std::string::npos);
  }
  const auto open = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: cost_gate\n      tables: [public.fct_shipments]\n      fail_behavior: allow\n");
  const Decision p2 = evaluate(*open.at("g"), "SELECT * FROM public.fct_shipments", stats.get());
  ASSERT_TRUE(p2.explain_sql.has_value());
  const Decision d2 = open.at("g")->planUnavailable(p2);
  EXPECT_FALSE(d2.denied);
  EXPECT_FALSE(d2.explain_sql.has_value());
}

TEST(CostGate, SeveralStatementsNeedingPlansAreRefused) {
  const auto groups = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: cost_gate\n      tables: [public.fct_shipments]\n");
  const Decision d = evaluate(*groups.at("g"), "SELECT 1; SELECT * FROM fct_shipments", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "MULTI_STATEMENT");
  EXPECT_FALSE(evaluate(*groups.at("g"), "SELECT 1; SELECT 2", nullptr).denied);
}

TEST(CostGate, WarnOnlyPlanCheckWarns) {
  const auto stats = test::sampleStats();
  const auto groups = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: cost_gate\n      action: warn\n      tables: [public.fct_shipments]\n");
  const auto& g = *groups.at("g");
  const Decision pending = evaluate(g, "SELECT * FROM fct_shipments WHERE status = 'X'", stats.get());
  const Decision d = g.evaluatePlan(pending, plan("Seq Scan", "fct_shipments", 10), stats.get());
  EXPECT_FALSE(d.denied);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0].code, "SEQ_SCAN");
}

// ---- runaway joins (the example's agents group: seq_scan allowed, only joins planned) ----

const PolicyGroup& joinGated() {
  static const auto groups = test::groupsFromYaml(
      "g:\n  search_path: [public]\n  guards:\n"
      "    - kind: cost_gate\n      seq_scan_rows: 100000\n      seq_scan: allow\n      plan: joins\n"
      "      max_join_growth: 100\n      max_cost: 1000000\n");
  return *groups.at("g");
}

std::string scan(const std::string& node, const std::string& relation, const std::string& alias, double rows,
                 const std::string& relationship, bool parallel = false) {
  return "{\"Node Type\": \"" + node + "\", \"Parent Relationship\": \"" + relationship +
         "\", \"Parallel Aware\": " + (parallel ? "true" : "false") + ", \"Relation Name\": \"" + relation +
         "\", \"Alias\": \"" + alias + "\", \"Total Cost\": 19000.0, \"Plan Rows\": " + std::to_string(rows) + "}";
}

std::string join(const std::string& node, double rows, const std::string& outer, const std::string& inner,
                 const std::string& relationship = "Outer") {
  return "{\"Node Type\": \"" + node + "\", \"Parent Relationship\": \"" + relationship +
         "\", \"Join Type\": \"Inner\", \"Total Cost\": 9.0e9, \"Plan Rows\": " + std::to_string(rows) +
         ", \"Plans\": [" + outer + ", " + inner + "]}";
}

std::string aggregateOver(const std::string& child, double cost) {
  return "[{\"Plan\": {\"Node Type\": \"Aggregate\", \"Total Cost\": " + std::to_string(cost) +
         ", \"Plan Rows\": 1, \"Plans\": [" + child + "]}}]";
}

// SELECT count(*) FROM fct_shipments a, fct_shipments b: a Nested Loop of a million rows by a million.
std::string productPlan() {
  return aggregateOver(join("Nested Loop", 1e12, scan("Seq Scan", "fct_shipments", "a", 1e6, "Outer"),
                            "{\"Node Type\": \"Materialize\", \"Parent Relationship\": \"Inner\", \"Plan Rows\": "
                            "1000000, \"Plans\": [" + scan("Seq Scan", "fct_shipments", "b", 1e6, "Outer") + "]}"),
                       2.5e10);
}

Decision planned(const PolicyGroup& g, const std::string& sql, const std::string& plan_json) {
  const auto stats = test::sampleStats();
  const Decision pending = evaluate(g, sql, stats.get());
  EXPECT_TRUE(pending.explain_sql.has_value()) << sql;
  if (!pending.explain_sql) return pending;
  return g.evaluatePlan(pending, plan_json, stats.get());
}

TEST(CostGate, PlanJoinsOnlyPlansReadsThatJoinABigTable) {
  const auto stats = test::sampleStats();
  for (const char* sql : {"SELECT count(*) FROM fct_shipments", "SELECT DISTINCT status FROM fct_shipments",
                          "SELECT count(*) FROM dim_region a, dim_region b"}) {
    EXPECT_FALSE(evaluate(joinGated(), sql, stats.get()).explain_sql.has_value()) << sql;
  }
  for (const char* sql : {"SELECT count(*) FROM fct_shipments a, fct_shipments b",
                          "SELECT count(*) FROM fct_shipments f JOIN dim_region r ON r.region = f.region",
                          "SELECT * FROM fct_shipments WHERE id = (SELECT max(id) FROM fct_shipments)",
                          "WITH s AS (SELECT * FROM fct_shipments) SELECT count(*) FROM s a, s b"}) {
    EXPECT_TRUE(evaluate(joinGated(), sql, stats.get()).explain_sql.has_value()) << sql;
  }
}

TEST(CostGate, SeqScanAllowedLetsABigTableBeReadWhole) {
  const auto groups = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: cost_gate\n      tables: [public.fct_shipments]\n      seq_scan: allow\n"
      "      max_cost: 50000\n");
  const Decision d = planned(*groups.at("g"), "SELECT count(*) FROM fct_shipments", plan("Seq Scan", "fct_shipments", 20000));
  EXPECT_FALSE(d.denied) << d.deny.message;
}

TEST(CostGate, AProductOfABigTableIsARunawayJoin) {
  const Decision d = planned(joinGated(), "SELECT count(*) FROM fct_shipments a, fct_shipments b", productPlan());
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "JOIN_EXPLOSION");
  EXPECT_EQ(d.deny.sqlstate, "54000");
  EXPECT_EQ(d.deny.message,
            "The plan joins public.fct_shipments a and public.fct_shipments b into about 1,000,000,000,000 rows "
            "(Nested Loop), far more than its larger input (about 1,000,000 rows): join on a key that matches each "
            "row to few rows of the other side, or filter both sides with WHERE; a LIMIT does not make the join "
            "smaller.");
  EXPECT_EQ(d.deny.detail.rfind("{\"code\":\"JOIN_EXPLOSION\",\"tables\":[\"public.fct_shipments a\","
                                "\"public.fct_shipments b\"],\"plan_node\":\"Nested Loop\",\"join_type\":\"Inner\","
                                "\"estimated_rows\":1000000000000,\"input_rows\":1000000,\"max_join_growth\":100,",
                                0),
            0u)
      << d.deny.detail;
  EXPECT_EQ(d.actions.back().code, "JOIN_EXPLOSION");
}

TEST(CostGate, AParallelPlansRowsAreCountedOverAllItsProcesses) {
  // Two workers and the leader: each process's estimate is a 2.4th of the whole.
  const std::string gathered =
      "{\"Node Type\": \"Gather\", \"Parent Relationship\": \"Outer\", \"Workers Planned\": 2, \"Plan Rows\": 2, "
      "\"Plans\": [{\"Node Type\": \"Aggregate\", \"Parent Relationship\": \"Outer\", \"Plan Rows\": 1, \"Plans\": [" +
      join("Nested Loop", 416666666667.0, scan("Seq Scan", "fct_shipments", "a", 416667, "Outer", true),
           scan("Index Only Scan", "fct_shipments", "b", 1e6, "Inner")) +
      "]}]}";
  const Decision d = planned(joinGated(), "SELECT count(*) FROM fct_shipments a, fct_shipments b",
                             aggregateOver(gathered, 1.3e10));
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "JOIN_EXPLOSION");
  EXPECT_NE(d.deny.detail.find("\"estimated_rows\":1000000000000,"), std::string::npos) << d.deny.detail;
}

TEST(CostGate, AJoinOnAKeyPasses) {
  const std::string on_id = aggregateOver(
      join("Hash Join", 1e6, scan("Seq Scan", "fct_shipments", "a", 1e6, "Outer"),
           "{\"Node Type\": \"Hash\", \"Parent Relationship\": \"Inner\", \"Plan Rows\": 1000000, \"Plans\": [" +
               scan("Seq Scan", "fct_shipments", "b", 1e6, "Outer") + "]}"),
      41000);
  const Decision d = planned(joinGated(), "SELECT count(*) FROM fct_shipments a JOIN fct_shipments b ON b.id = a.id", on_id);
  EXPECT_FALSE(d.denied) << d.deny.message;
}

TEST(CostGate, AJoinOnALowCardinalityKeyIsARunawayJoin) {
  const std::string on_status = aggregateOver(
      join("Hash Join", 3.3e11, scan("Seq Scan", "fct_shipments", "a", 1e6, "Outer"),
           "{\"Node Type\": \"Hash\", \"Parent Relationship\": \"Inner\", \"Plan Rows\": 1000000, \"Plans\": [" +
               scan("Seq Scan", "fct_shipments", "b", 1e6, "Outer") + "]}"),
      500000);
  const Decision d =
      planned(joinGated(), "SELECT count(*) FROM fct_shipments a JOIN fct_shipments b ON a.status = b.status", on_status);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "JOIN_EXPLOSION") << "named before the cost, which is under max_cost here";
}

TEST(CostGate, SmallProductsAreNotRunaway) {
  // Both sides filtered to about a thousand rows: a million pairs, about the size of the table.
  const std::string filtered = aggregateOver(
      join("Nested Loop", 1.1e6, scan("Index Scan", "fct_shipments", "a", 1042, "Outer"),
           scan("Index Scan", "fct_shipments", "b", 1042, "Inner")),
      17000);
  EXPECT_FALSE(planned(joinGated(), "SELECT count(*) FROM fct_shipments a, fct_shipments b WHERE a.id < 1000 AND b.id < 1000",
                       filtered)
                   .denied);
  // Under min_join_rows (a million by default) a join never counts as runaway, however it grows.
  const std::string tiny = aggregateOver(join("Nested Loop", 144, scan("Seq Scan", "dim_region", "a", 12, "Outer"),
                                              scan("Seq Scan", "dim_region", "b", 12, "Inner")),
                                         5);
  EXPECT_FALSE(planned(joinGated(), "SELECT count(*) FROM fct_shipments f, dim_region a, dim_region b", tiny).denied);
}

TEST(CostGate, CteAndFunctionScansAreNamedByWhatTheyRead) {
  const std::string cte = aggregateOver(
      join("Nested Loop", 1e12,
           "{\"Node Type\": \"CTE Scan\", \"Parent Relationship\": \"Outer\", \"CTE Name\": \"s\", \"Alias\": \"a\", "
           "\"Plan Rows\": 1000000}",
           "{\"Node Type\": \"Function Scan\", \"Parent Relationship\": \"Inner\", \"Function Name\": "
           "\"generate_series\", \"Alias\": \"g\", \"Plan Rows\": 1000000}"),
      2.5e10);
  const Decision d =
      planned(joinGated(), "WITH s AS (SELECT * FROM fct_shipments) SELECT count(*) FROM s a, generate_series(1, 1000000) g",
              cte);
  ASSERT_TRUE(d.denied);
  EXPECT_NE(d.deny.message.find("joins s a and generate_series() g into"), std::string::npos) << d.deny.message;
}

TEST(CostGate, CostOfAJoinAboveTheLimitIsRefused) {
  // Growth 50: not runaway, but the plan costs more than max_cost.
  const std::string fanout = aggregateOver(
      join("Hash Join", 5e7, scan("Seq Scan", "fct_shipments", "a", 1e6, "Outer"),
           "{\"Node Type\": \"Hash\", \"Parent Relationship\": \"Inner\", \"Plan Rows\": 1000000, \"Plans\": [" +
               scan("Seq Scan", "fct_shipments", "b", 1e6, "Outer") + "]}"),
      4.3e6);
  const Decision d =
      planned(joinGated(), "SELECT count(*) FROM fct_shipments a JOIN fct_shipments b ON a.ship_date = b.ship_date", fanout);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "COST_TOO_HIGH");
}

}  // namespace
}  // namespace pgwarden::guards
