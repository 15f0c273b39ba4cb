// ASSERTION_FAILED and the group's declarations: result_assertions resolved per statement, rows
// checked against them, the screen that names the rows; soft_delete_columns; and the config
// errors --check-config reports for both.
#include <yaml-cpp/yaml.h>

#include "guards/guard.h"
#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::rows;
using screentest::Screening;

guards::PolicyMap groupsOf(const char* yaml) { return guards::parsePolicyGroups(YAML::Load(yaml)); }

const char* kGroups = R"(
g:
  result_assertions:
    - {columns: "*_pct", min: 0, max: 100}
    - {columns: "*_rate", min: 0, max: 1, tables: [public.orders]}
    - {columns: amount, min: 0}
    - {tools: [daily_total], rows: 1}
  soft_delete_columns: [public.orders.cancelled_at]
)";

struct Checked {
  std::shared_ptr<const analysis::Analysis> analysis;
  std::vector<guards::AssertionCheck> checks;
};

Checked checksOf(const guards::PolicyGroup& g, std::string_view sql, std::string_view tool = "") {
  Checked c;
  c.analysis = analysis::analyzeUncached(sql);
  guards::assertionChecks(g.settings(), c.analysis->statements.at(0), tool, c.checks);
  return c;
}

TEST(ResultAssertions, ResolvedByTheResultsColumnNames) {
  auto groups = groupsOf(kGroups);
  const guards::PolicyGroup& g = *groups.at("g");
  auto c = checksOf(g, "SELECT id, discount_pct * 100 AS discount_pct, paid_rate FROM orders");
  ASSERT_EQ(c.checks.size(), 2u);
  EXPECT_EQ(c.checks[0].column, 1);
  EXPECT_EQ(c.checks[0].name, "discount_pct");
  EXPECT_EQ(guards::boundsText(c.checks[0]), "0..100");
  EXPECT_EQ(c.checks[1].column, 2);
  // The rate's assertion holds for orders only; `*` hides which column is where; the tool's row
  // count only for that tool.
  EXPECT_EQ(checksOf(g, "SELECT paid_rate FROM items").checks.size(), 0u);
  EXPECT_EQ(checksOf(g, "SELECT * FROM orders").checks.size(), 0u);
  EXPECT_EQ(checksOf(g, "SELECT sum(amount) AS amount FROM orders", "daily_total").checks.size(),
            2u);
  EXPECT_EQ(checksOf(g, "SELECT 1 AS x FROM orders").checks.size(), 0u);
  EXPECT_TRUE(guards::hasToolAssertions(g.settings()));
}

TEST(ResultAssertions, RowsOutsideTheBoundsAreNamed) {
  auto groups = groupsOf(kGroups);
  const guards::PolicyGroup& g = *groups.at("g");
  const std::string sql = "SELECT id, discount_pct * 100 AS discount_pct FROM orders ORDER BY id";
  auto c = checksOf(g, sql);
  guards::AssertionFailures failures;
  int64_t row = 0;
  for (const char* v : {"5", "150", "-1", "100", "abc"}) {
    const std::vector<std::optional<std::string_view>> values{std::string_view("1"),
                                                              std::string_view(v)};
    guards::checkRow(c.checks, values, ++row, failures);
  }
  guards::checkRow(c.checks, {std::string_view("7"), std::nullopt}, ++row,
                   failures);  // NULL passes
  ASSERT_EQ(failures.count, 2);
  Screening r;
  r.group = &g;
  r.result = rows(6);
  r.result.checks = &c.checks;
  r.result.failures = &failures;
  auto vs = r.screen(sql);
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"ASSERTION_FAILED"});
  EXPECT_EQ(vs[0].message.rfind(
                "2 values break what this result is declared to hold (row 2: discount_pct = 150 "
                "(expected 0..100); row 3: discount_pct = -1 (expected 0..100))",
                0),
            0u)
      << vs[0].message;
  EXPECT_EQ(vs[0].hint,
            "SELECT * FROM (" + sql + ") AS q WHERE q.discount_pct < 0 OR q.discount_pct > 100");
  // Set to deny, it denies.
  auto deny = groupsOf(R"(
g:
  result_screens: {ASSERTION_FAILED: deny}
  result_assertions: [{columns: "*_pct", max: 100}]
)");
  r.group = deny.at("g").get();
  vs = r.screen(sql);
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"ASSERTION_FAILED"});
  EXPECT_EQ(vs[0].action, guards::Action::kDeny);
  // No failure: silent.
  failures = {};
  r.group = &g;
  EXPECT_TRUE(r.screen(sql).empty());
}

TEST(ResultAssertions, AScalarToolReturnsExactlyOneRow) {
  auto groups = groupsOf(kGroups);
  const guards::PolicyGroup& g = *groups.at("g");
  const std::string sql = "SELECT day, sum(amount) AS total FROM orders GROUP BY day";
  auto c = checksOf(g, sql, "daily_total");
  Screening r;
  r.group = &g;
  r.result = rows(3);
  r.result.checks = &c.checks;
  auto vs = r.screen(sql);
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"ASSERTION_FAILED"});
  EXPECT_EQ(vs[0].message.rfind("This result has 3 rows; it is declared to return exactly 1.", 0),
            0u)
      << vs[0].message;
  EXPECT_NE(vs[0].detail.find("\"expected_rows\":1"), std::string::npos);
  r.result = rows(1);
  r.result.checks = &c.checks;
  EXPECT_TRUE(r.screen(sql).empty());
}

TEST(ResultAssertions, ConfigErrorsNameTheKey) {
  for (const char* bad :
       {"g: {result_assertions: [{columns: x_pct, min: 5, max: 1}]}",
        "g: {result_assertions: [{columns: x_pct}]}", "g: {result_assertions: [{min: 0}]}",
        "g: {result_assertions: [{columns: x, min: 0, colour: red}]}",
        "g: {result_assertions: {columns: x, min: 0}}",
        "g: {soft_delete_columns: [orders.cancelled_at]}",
        "g: {soft_delete_columns: [public..x]}"}) {
    EXPECT_THROW(groupsOf(bad), std::exception) << bad;
  }
}

TEST(SoftDeleteColumns, DeclaredPerTable) {
  auto groups = groupsOf(kGroups);
  auto col = [](std::string name, std::string type, std::string cat,
                std::string null_frac) -> std::vector<std::string> {
    return {"public", "orders", name,   type,    cat,     "",      "",        "", "",
            "-0.5",   "",       "true", "false", "false", "false", null_frac, ""};
  };
  Screening r;
  r.group = groups.at("g").get();
  r.stats = analysis::TableStatsSnapshot::fromRows(
      {{"public", "orders", "3000", "id", "integer"}},
      {col("cancelled_at", "timestamp with time zone", "D", "0.9"),
       col("tenant_id", "integer", "N", "0")});
  r.result = rows(1);
  auto vs = r.screen("SELECT count(*) FROM orders WHERE tenant_id = 3");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"SOFT_DELETED_ROWS"});
  EXPECT_EQ(vs[0].hint, "SELECT count(*) FROM orders WHERE cancelled_at IS NULL AND tenant_id = 3");
  EXPECT_NE(vs[0].detail.find("\"deleted_rows\":300"), std::string::npos) << vs[0].detail;
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM orders WHERE tenant_id = 3 AND cancelled_at IS NULL").empty());
  EXPECT_TRUE(r.screen("SELECT count(*), max(cancelled_at) FROM orders").empty());
  // Another group declares nothing: the column's name says nothing of deletion.
  r.group = nullptr;
  EXPECT_TRUE(r.screen("SELECT count(*) FROM orders WHERE tenant_id = 3").empty());
}

}  // namespace
}  // namespace pgwarden::screens
