// Operator-defined tools: named parameters become $n outside literals and comments, values bind
// as text and never as SQL, range caps, the plan check, and config errors naming tool and key.
#include "mcp/operator_tools.h"

#include <gtest/gtest.h>

#include "common/config_util.h"

namespace pgwarden::mcp {
namespace {

std::string bindNames(std::string_view sql, std::vector<std::string>* names = nullptr) {
  std::vector<std::string> n;
  auto r = bindNamedParameters(sql, n);
  if (names) *names = n;
  return r.ok() ? *r : "ERROR: " + r.error();
}

TEST(BindNamedParameters, NumbersNamesInOrderOfFirstUse) {
  std::vector<std::string> names;
  EXPECT_EQ(bindNames("SELECT * FROM t WHERE a >= $from AND a < $to AND b = $from", &names),
            "SELECT * FROM t WHERE a >= $1 AND a < $2 AND b = $1");
  EXPECT_EQ(names, (std::vector<std::string>{"from", "to"}));
  EXPECT_EQ(bindNames("SELECT $status::text IS NULL OR s = $status"), "SELECT $1::text IS NULL OR s = $1");
}

TEST(BindNamedParameters, LeavesLiteralsCommentsAndDollarQuotesAlone) {
  std::vector<std::string> names;
  EXPECT_EQ(bindNames("SELECT '$a', \"$b\", E'it\\'s $c', $d -- $e\n/* $f /* $g */ */ $$ $h $$, $tag$ $i $tag$", &names),
            "SELECT '$a', \"$b\", E'it\\'s $c', $1 -- $e\n/* $f /* $g */ */ $$ $h $$, $tag$ $i $tag$");
  EXPECT_EQ(names, (std::vector<std::string>{"d"}));
  EXPECT_EQ(bindNames("SELECT 'it''s $x' || $y", &names), "SELECT 'it''s $x' || $1");
  EXPECT_EQ(names, (std::vector<std::string>{"y"}));
  // An identifier with a $ in it is not a parameter.
  EXPECT_EQ(bindNames("SELECT a$b FROM t", &names), "SELECT a$b FROM t");
  EXPECT_TRUE(names.empty());
}

TEST(BindNamedParameters, RefusesPositionalAndUnterminated) {
  EXPECT_NE(bindNames("SELECT $1").find("positional"), std::string::npos);
  EXPECT_NE(bindNames("SELECT 'open").find("unterminated"), std::string::npos);
  EXPECT_NE(bindNames("SELECT /* open").find("unterminated"), std::string::npos);
  EXPECT_NE(bindNames("SELECT $q$ open").find("unterminated"), std::string::npos);
}

TEST(BindValue, TextFormatValuesNeverSql) {
  EXPECT_EQ(bindValue(Json("'); DROP TABLE x; --")), std::optional<std::string>("'); DROP TABLE x; --"));
  EXPECT_EQ(bindValue(Json(nullptr)), std::nullopt);
  EXPECT_EQ(bindValue(Json(true)), std::optional<std::string>("true"));
  EXPECT_EQ(bindValue(Json(42)), std::optional<std::string>("42"));
  EXPECT_EQ(bindValue(Json(1.5)), std::optional<std::string>("1.5"));
  EXPECT_EQ(bindValue(Json::array({"a\"b", nullptr, 3})), std::optional<std::string>(R"({"a\"b",NULL,"3"})"));
  EXPECT_EQ(bindValue(Json{{"k", 1}}), std::optional<std::string>(R"({"k":1})"));
}

std::shared_ptr<const OperatorToolSet> parse(const std::string& yaml) {
  return parseOperatorTools(YAML::Load(yaml)["tools"], {"agents", "analysts"}, {"query", "explain"});
}

const char* kLate = R"(
tools:
  - name: late
    description: late shipments
    parameters:
      type: object
      required: [from, to]
      properties:
        from: {type: string, format: date}
        to: {type: string, format: date}
        status: {type: string, enum: [DELIVERED, DELAYED]}
    range_caps:
      - {from: from, to: to, max_days: 92}
    sql: |
      SELECT id FROM s WHERE d >= $from AND d < $to AND ($status::text IS NULL OR status = $status)
      ORDER BY d DESC;
    max_rows: 500
    plan_check: {deny_seq_scan_on: [Analytics.S]}
    result: rows
)";

TEST(ParseOperatorTools, CompilesTheExample) {
  auto set = parse(kLate);
  ASSERT_EQ(set->all().size(), 1u);
  const OperatorTool* t = set->find("late");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->param_names, (std::vector<std::string>{"from", "to", "status"}));
  EXPECT_NE(t->bound_sql.find("d >= $1 AND d < $2"), std::string::npos);
  // The trailing ';' is gone and the cap plus one row is appended on its own line.
  const std::string tail = "ORDER BY d DESC\nLIMIT 501";
  ASSERT_GE(t->bound_sql.size(), tail.size());
  EXPECT_EQ(t->bound_sql.substr(t->bound_sql.size() - tail.size()), tail);
  EXPECT_EQ(t->deny_seq_scan_on, (std::vector<std::string>{"analytics.s"}));
  EXPECT_TRUE(t->visibleTo("agents"));
  EXPECT_EQ(t->parameters.source()["additionalProperties"], false);
}

std::string parseError(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const config::ConfigError& e) {
    return e.key() + ": " + e.what();
  }
  return "no error";
}

TEST(ParseOperatorTools, ErrorsNameTheToolAndTheKey) {
  const std::string head = "tools:\n  - name: t\n    description: d\n";
  EXPECT_NE(parseError(head + "    sql: SELECT $x\n").find("tools.t.sql"), std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT 1\n    parameters: {type: object, properties: {a: {type: string}}}\n")
                .find("tools.t.parameters.properties.a"),
            std::string::npos);
  EXPECT_NE(parseError(head + "    sql: DELETE FROM s\n").find("must be a read"), std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT 1 FOR UPDATE\n").find("must be a read"), std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT 1; SELECT 2\n").find("exactly one"), std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT 1 LIMIT 3\n").find("max_rows"), std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT 1\n    groups: [nobody]\n").find("tools.t.groups"), std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT 1\n    result: table\n").find("tools.t.result"), std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT 1\n    colour: red\n").find("colour"), std::string::npos);
  EXPECT_NE(parseError("tools:\n  - name: query\n    description: d\n    sql: SELECT 1\n").find("built-in"),
            std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT 1\n" + "  - name: t\n    description: d\n    sql: SELECT 2\n")
                .find("twice"),
            std::string::npos);
  EXPECT_NE(parseError(head + "    sql: SELECT $a\n    parameters: {type: object, properties: {a: {not: {}}}}\n")
                .find("tools.t.parameters"),
            std::string::npos);
}

TEST(RangeCaps, WidthOrderAndPresence) {
  auto set = parse(kLate);
  const OperatorTool& t = *set->find("late");
  EXPECT_FALSE(checkRangeCaps(t, Json{{"from", "2024-07-01"}, {"to", "2024-10-01"}}));  // exactly 92 days
  auto wide = checkRangeCaps(t, Json{{"from", "2023-01-01"}, {"to", "2024-02-05"}});
  ASSERT_TRUE(wide);
  EXPECT_EQ((*wide)["code"], "RANGE_TOO_WIDE");
  EXPECT_EQ((*wide)["max_days"], 92);
  EXPECT_EQ((*wide)["got_days"], 400);
  EXPECT_NE((*wide)["next_step"].get<std::string>().find("5 calls"), std::string::npos);
  auto reversed = checkRangeCaps(t, Json{{"from", "2024-02-01"}, {"to", "2024-01-01"}});
  ASSERT_TRUE(reversed);
  EXPECT_EQ((*reversed)["code"], "RANGE_REVERSED");
  auto half = checkRangeCaps(t, Json{{"from", "2024-02-01"}});
  ASSERT_TRUE(half);
  EXPECT_EQ((*half)["code"], "RANGE_REQUIRED");
  // Leap day counted.
  EXPECT_EQ((*checkRangeCaps(t, Json{{"from", "2024-01-01"}, {"to", "2024-12-31"}}))["got_days"], 365);
}

TEST(PlanCheck, DeniesASeqScanOnAListedTableOnly) {
  auto set = parse(kLate);
  const OperatorTool& t = *set->find("late");
  analysis::PlanSummary plan;
  analysis::PlanScan scan;
  scan.node_type = "Seq Scan";
  scan.schema = "analytics";
  scan.relation = "s";
  scan.plan_rows = 12345;
  plan.scans.push_back(scan);
  auto r = checkToolPlan(t, plan, nullptr);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, "SEQ_SCAN");
  EXPECT_NE(r->message.find("analytics.s"), std::string::npos);
  plan.scans[0].node_type = "Index Scan";
  EXPECT_FALSE(checkToolPlan(t, plan, nullptr));
  plan.scans[0].node_type = "Seq Scan";
  plan.scans[0].schema = "public";
  EXPECT_FALSE(checkToolPlan(t, plan, nullptr));
}

}  // namespace
}  // namespace pgwarden::mcp
