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
  const auto a = analyzeUncached(*d.explain_sql);
  ASSERT_TRUE(a->ok);
  EXPECT_EQ(a->statements.size(), 1u);
  EXPECT_EQ(a->statements[0].kind, StatementKind::kExplain);
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

}  // namespace
}  // namespace pgwarden::guards
