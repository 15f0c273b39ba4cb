// guards: row_limit. LIMIT above max_limit is refused; reads are rewritten so the engine stops at
// max_rows + 1, editing only what the parser located, on texts built to trip a naive rewrite.
#include "tests/unit/guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

using test::evaluate;

const PolicyGroup& limits() {
  static const auto groups = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: row_limit\n      max_limit: 10000\n      max_rows: 1000\n");
  return *groups.at("g");
}

struct Rewrite {
  const char* sql;
  const char* expected;  // nullptr: forwarded unchanged
};
std::ostream& operator<<(std::ostream& os, const Rewrite& r) { return os << r.sql; }

class RowLimitRewrite : public ::testing::TestWithParam<Rewrite> {};

TEST_P(RowLimitRewrite, EngineStopsAfterMaxRowsPlusOne) {
  const Rewrite& c = GetParam();
  const Decision d = evaluate(limits(), c.sql, nullptr);
  ASSERT_FALSE(d.denied) << d.deny.message;
  EXPECT_EQ(d.max_rows, 1000);
  EXPECT_EQ(d.truncation.code, "ROWS_TRUNCATED");
  EXPECT_NE(d.truncation.message.find("truncated at 1000 rows"), std::string::npos) << d.truncation.message;
  EXPECT_TRUE(d.truncation_notice.empty()) << d.truncation_notice;
  if (!c.expected) {
    EXPECT_FALSE(d.rewritten_sql.has_value()) << *d.rewritten_sql;
    return;
  }
  ASSERT_TRUE(d.rewritten_sql.has_value());
  EXPECT_EQ(*d.rewritten_sql, c.expected);
  // Whatever the text, the result parses, keeps its statement count, and every read is capped.
  const auto before = analysis::analyzeUncached(c.sql);
  const auto after = analysis::analyzeUncached(*d.rewritten_sql);
  ASSERT_TRUE(after->ok) << after->error;
  ASSERT_EQ(after->statements.size(), before->statements.size());
  for (const auto& st : after->statements) {
    EXPECT_EQ(st.limit, analysis::LimitKind::kConstant);
    EXPECT_EQ(st.limit_value, 1001);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Texts, RowLimitRewrite,
    ::testing::Values(
        Rewrite{"SELECT * FROM t", "SELECT * FROM t\nLIMIT 1001"},
        Rewrite{"SELECT * FROM t;", "SELECT * FROM t\nLIMIT 1001;"},
        Rewrite{"SELECT * FROM t ;  \n", "SELECT * FROM t \nLIMIT 1001;  \n"},
        Rewrite{"SELECT * FROM t -- trailing comment", "SELECT * FROM t -- trailing comment\nLIMIT 1001"},
        Rewrite{"SELECT * FROM t -- comment\n;", "SELECT * FROM t -- comment\n\nLIMIT 1001;"},
        Rewrite{"SELECT * FROM t; -- comment after", "SELECT * FROM t\nLIMIT 1001; -- comment after"},
        Rewrite{"SELECT * FROM t /* block */", "SELECT * FROM t /* block */\nLIMIT 1001"},
        Rewrite{"SELECT * FROM t LIMIT 5000", "SELECT * FROM t LIMIT 1001"},
        Rewrite{"SELECT * FROM t LIMIT 10000;", "SELECT * FROM t LIMIT 1001;"},
        Rewrite{"SELECT * FROM t LIMIT 5000 OFFSET 20", "SELECT * FROM t LIMIT 1001 OFFSET 20"},
        Rewrite{"SELECT * FROM t OFFSET 20 LIMIT 5000", "SELECT * FROM t OFFSET 20 LIMIT 1001"},
        Rewrite{"SELECT * FROM t LIMIT ALL", "SELECT * FROM t LIMIT 1001"},
        Rewrite{"SELECT * FROM t LIMIT 2e3", "SELECT * FROM t LIMIT 1001"},
        Rewrite{"SELECT * FROM t OFFSET 5", "SELECT * FROM t OFFSET 5\nLIMIT 1001"},
        Rewrite{"SELECT * FROM t ORDER BY a DESC", "SELECT * FROM t ORDER BY a DESC\nLIMIT 1001"},
        Rewrite{"SELECT a FROM t UNION SELECT b FROM u", "SELECT a FROM t UNION SELECT b FROM u\nLIMIT 1001"},
        Rewrite{"SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1",
                "SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1\nLIMIT 1001"},
        Rewrite{"(SELECT a FROM t LIMIT 5) UNION (SELECT b FROM u)",
                "(SELECT a FROM t LIMIT 5) UNION (SELECT b FROM u)\nLIMIT 1001"},
        Rewrite{"SELECT * FROM t FETCH FIRST 5000 ROWS ONLY", "SELECT * FROM t FETCH FIRST 1001 ROWS ONLY"},
        Rewrite{"SELECT * FROM t ORDER BY a FETCH NEXT 5000 ROWS WITH TIES",
                "SELECT * FROM t ORDER BY a FETCH NEXT 1001 ROWS WITH TIES"},
        Rewrite{"WITH x AS (SELECT * FROM t LIMIT 99999) SELECT * FROM x",
                "WITH x AS (SELECT * FROM t LIMIT 99999) SELECT * FROM x\nLIMIT 1001"},
        Rewrite{"VALUES (1), (2)", "VALUES (1), (2)\nLIMIT 1001"},
        Rewrite{"TABLE t", "TABLE t\nLIMIT 1001"},
        Rewrite{"(SELECT 1)", "(SELECT 1)\nLIMIT 1001"},
        Rewrite{"SELECT 'it''s -- not a comment', $$ ; LIMIT 5 $$ FROM t",
                "SELECT 'it''s -- not a comment', $$ ; LIMIT 5 $$ FROM t\nLIMIT 1001"},
        Rewrite{"SELECT 'ünïcødé' AS x FROM t LIMIT 5000", "SELECT 'ünïcødé' AS x FROM t LIMIT 1001"},
        Rewrite{"/* lead */ SELECT * FROM t", "/* lead */ SELECT * FROM t\nLIMIT 1001"},
        Rewrite{"SELECT 1; SELECT 2 LIMIT 3000", "SELECT 1\nLIMIT 1001; SELECT 2 LIMIT 1001"},
        Rewrite{"SELECT * FROM t WHERE a = $1 LIMIT $2", nullptr}));

TEST(RowLimit, SmallLimitsAreLeftAlone) {
  for (const char* sql : {"SELECT * FROM t LIMIT 10", "SELECT * FROM t LIMIT 1000", "SELECT * FROM t FETCH FIRST ROW ONLY"}) {
    const Decision d = evaluate(limits(), sql, nullptr);
    EXPECT_FALSE(d.denied);
    EXPECT_FALSE(d.rewritten_sql.has_value()) << sql;
    EXPECT_EQ(d.max_rows, -1) << sql;
    EXPECT_TRUE(d.actions.empty());
  }
}

TEST(RowLimit, LimitAboveMaximumIsRefused) {
  const Decision d = evaluate(limits(), "SELECT * FROM t WHERE a = 1 LIMIT 10001", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "LIMIT_TOO_LARGE");
  EXPECT_EQ(d.deny.sqlstate, "54000");
  EXPECT_EQ(d.deny.message, "LIMIT 10001 is above the maximum of 10000 rows; use LIMIT 10000 or less, or aggregate the rows with GROUP BY.");
  EXPECT_EQ(d.deny.detail, "{\"code\":\"LIMIT_TOO_LARGE\",\"limit\":10001,\"max_limit\":10000,\"next_step\":\"use LIMIT 10000 or less\"}");
  EXPECT_EQ(d.deny.hint, "SELECT * FROM t WHERE a = 1 LIMIT 10000");
  EXPECT_FALSE(evaluate(limits(), d.deny.hint, nullptr).denied);
}

TEST(RowLimit, LimitExpressionsAreRefused) {
  for (const char* sql : {"SELECT * FROM t LIMIT 10 * 1000", "SELECT * FROM t LIMIT (SELECT 5)", "SELECT * FROM t LIMIT '5'"}) {
    const Decision d = evaluate(limits(), sql, nullptr);
    ASSERT_TRUE(d.denied) << sql;
    EXPECT_EQ(d.deny.code, "LIMIT_TOO_LARGE");
  }
}

TEST(RowLimit, NonReadsAreNotTouched) {
  for (const char* sql : {"SELECT * INTO x FROM t", "EXPLAIN SELECT * FROM t", "SHOW ALL", "INSERT INTO t SELECT * FROM u",
                          "FETCH ALL FROM c", "BEGIN"}) {
    const Decision d = evaluate(limits(), sql, nullptr);
    EXPECT_FALSE(d.denied) << sql;
    EXPECT_FALSE(d.rewritten_sql.has_value()) << sql;
    EXPECT_EQ(d.max_rows, -1) << sql;
  }
}

TEST(RowLimit, CursorsAndPreparedStatementsAreCappedWithANotice) {
  for (const char* sql : {"DECLARE c CURSOR FOR SELECT * FROM t", "PREPARE p AS SELECT * FROM t"}) {
    SCOPED_TRACE(sql);
    const Decision d = evaluate(limits(), sql, nullptr);
    ASSERT_FALSE(d.denied);
    ASSERT_TRUE(d.rewritten_sql.has_value());
    EXPECT_EQ(*d.rewritten_sql, std::string(sql) + "\nLIMIT 1000");
    EXPECT_EQ(d.max_rows, -1);
    ASSERT_EQ(d.warnings.size(), 1u);
    EXPECT_EQ(d.warnings[0].code, "ROWS_CAPPED");
    EXPECT_NE(d.warnings[0].message.find("capped at 1000"), std::string::npos);
  }
}

TEST(RowLimit, CopyOfNoTableOrOfSmallTablesNeedsNoLimit) {
  const auto stats = analysis::TableStatsSnapshot::fromRows(
      {{"public", "small", "900", ""}, {"public", "big", "5000", ""}});
  EXPECT_FALSE(evaluate(limits(), "COPY (SELECT 1) TO STDOUT", nullptr).denied);
  EXPECT_FALSE(evaluate(limits(), "COPY (SELECT n FROM generate_series(1, 10) n) TO STDOUT", nullptr).denied);
  EXPECT_FALSE(evaluate(limits(), "COPY small TO STDOUT", stats.get()).denied);
  EXPECT_FALSE(evaluate(limits(), "COPY (SELECT * FROM small) TO STDOUT", stats.get()).denied);
  EXPECT_TRUE(evaluate(limits(), "COPY big TO STDOUT", stats.get()).denied);
  EXPECT_TRUE(evaluate(limits(), "COPY (SELECT * FROM small JOIN big USING (id)) TO STDOUT", stats.get()).denied);
  EXPECT_TRUE(evaluate(limits(), "COPY small TO STDOUT", nullptr).denied);  // size unknown yet
}

TEST(RowLimit, CopyToClientNeedsASmallLimit) {
  EXPECT_FALSE(evaluate(limits(), "COPY (SELECT * FROM t LIMIT 500) TO STDOUT", nullptr).denied);
  for (const char* sql : {"COPY t TO STDOUT", "COPY (SELECT * FROM t) TO STDOUT", "COPY (SELECT * FROM t LIMIT 5000) TO STDOUT"}) {
    const Decision d = evaluate(limits(), sql, nullptr);
    ASSERT_TRUE(d.denied) << sql;
    EXPECT_EQ(d.deny.code, "LIMIT_REQUIRED");
    EXPECT_EQ(d.deny.hint, "COPY (SELECT 1 LIMIT 1000) TO STDOUT");
  }
}

TEST(RowLimit, UnboundedRecursionIsRefusedUnlessTurnedOff) {
  const char* sql = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r";
  const Decision d = evaluate(limits(), sql, nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "RECURSION_UNBOUNDED");
  EXPECT_FALSE(evaluate(limits(), d.deny.hint, nullptr).denied);
  const auto off = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: row_limit\n      max_rows: 10\n      deny_unbounded_recursion: false\n");
  const Decision lazy = evaluate(*off.at("g"), sql, nullptr);
  ASSERT_FALSE(lazy.denied);
  EXPECT_EQ(*lazy.rewritten_sql, std::string(sql) + "\nLIMIT 11");
}

TEST(RowLimit, TwoCapsInOneChainGiveOneLimitAndTheSmallerCap) {
  const auto groups = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: row_limit\n      max_rows: 100\n    - kind: row_limit\n      max_rows: 50\n");
  const Decision d = evaluate(*groups.at("g"), "SELECT * FROM t", nullptr);
  EXPECT_EQ(d.max_rows, 50);
  ASSERT_TRUE(d.rewritten_sql.has_value());
  const auto again = analysis::analyzeUncached(*d.rewritten_sql);
  ASSERT_TRUE(again->ok) << *d.rewritten_sql;
  EXPECT_EQ(again->statements[0].limit, analysis::LimitKind::kConstant);
  EXPECT_GT(again->statements[0].limit_value, 50);  // the engine still overshoots the cap, so a cut shows
}

TEST(RowLimit, TruncationNoticeAndHint) {
  const Decision d = evaluate(limits(), "SELECT * FROM t -- see all", nullptr);
  EXPECT_EQ(d.truncation.action, Action::kWarn);
  EXPECT_EQ(d.truncation.sqlstate, "01000");
  // The detail is written when the notice is sent.
  EXPECT_TRUE(d.truncation.detail.empty());
  EXPECT_EQ(truncationDetail(d.max_rows),
            "{\"code\":\"ROWS_TRUNCATED\",\"max_rows\":1000,\"next_step\":\"narrow the query with WHERE, GROUP BY or ORDER BY ... LIMIT\"}");
  EXPECT_EQ(d.truncation.hint, "SELECT count(*) FROM (\nSELECT * FROM t -- see all\n) AS t");
  const auto hint = analysis::analyzeUncached(d.truncation.hint);
  ASSERT_TRUE(hint->ok);
  EXPECT_TRUE(hint->statements[0].has_aggregate);
}

// A table's row: schema, name, rows, index columns and types, oid, attributes, relkind and
// whether it has inheritance children. A column's row marks `id` unique and `code` not.
std::shared_ptr<const analysis::TableStatsSnapshot> keyedCatalog(const char* kind, const char* children) {
  auto column = [](const char* table, const char* name, const char* unique) {
    return std::vector<std::string>{"public", table, name, "integer", "N", "", "", "", "", "0", "", "false",
                                    unique};
  };
  return analysis::TableStatsSnapshot::fromRows(
      {{"public", "t", "5000000", "id,code", "integer,integer", "16400", "{}", kind, children},
       {"public", "old", "5000000", "id", "integer", "16401", "{}", "r"}},
      {column("t", "id", "true"), column("t", "code", "false"), column("old", "id", "true")});
}

// A read that returns at most one row needs no LIMIT: the text runs as written and no action is
// recorded, while the session still counts the rows against max_rows.
TEST(RowLimit, AReadOfOneRowByAUniqueColumnRunsAsWrittenAndStaysCounted) {
  const auto stats = keyedCatalog("r", "false");
  for (const char* sql : {"SELECT a FROM t WHERE id = 42", "SELECT * FROM public.t x WHERE x.code > 1 AND 7 = x.id",
                          "SELECT a FROM t WHERE code = 1 AND id = 'x' ORDER BY a"}) {
    const Decision d = evaluate(limits(), sql, stats.get());
    ASSERT_FALSE(d.denied) << sql;
    EXPECT_FALSE(d.rewritten_sql.has_value()) << sql << " -> " << *d.rewritten_sql;
    EXPECT_TRUE(d.actions.empty()) << sql;
    EXPECT_EQ(d.max_rows, 1000) << sql;
    EXPECT_EQ(d.truncation.code, "ROWS_TRUNCATED") << sql;
    EXPECT_NE(d.truncation.message.find("truncated at 1000 rows"), std::string::npos) << sql;
  }
  // A parameter whose type the server infers from the column (the Parse declared none).
  for (const char* sql : {"SELECT a FROM t WHERE id = $1", "SELECT a FROM t WHERE code = $2 AND $1 = id"}) {
    const Decision d = evaluate(limits(), sql, stats.get(), true, true);
    EXPECT_FALSE(d.rewritten_sql.has_value()) << sql;
    EXPECT_EQ(d.max_rows, 1000) << sql;
  }
  EXPECT_TRUE(evaluate(limits(), "SELECT a FROM t WHERE code = $1", stats.get(), true, true).rewritten_sql);
  // A partitioned table's unique index holds the partition key: it covers every partition.
  const auto partitioned = keyedCatalog("p", "true");
  EXPECT_FALSE(evaluate(limits(), "SELECT a FROM t WHERE id = 42", partitioned.get()).rewritten_sql.has_value());
}

TEST(RowLimit, AnyOtherReadIsStillCappedInItsText) {
  const auto plain = keyedCatalog("r", "false");
  struct Case {
    const char* sql;
    std::shared_ptr<const analysis::TableStatsSnapshot> stats;
  };
  for (const Case& c : {
           Case{"SELECT a FROM t WHERE code = 42", plain},                  // not unique
           Case{"SELECT a FROM t WHERE id > 42", plain},                    // a range
           Case{"SELECT a FROM t WHERE id::text = '42'", plain},            // the column cast
           Case{"SELECT a FROM t WHERE id = $1", plain},                    // a declared parameter
           Case{"SELECT a FROM t WHERE id IN (1, 2)", plain},               // two values
           Case{"SELECT a FROM t WHERE id = 42 OR code = 1", plain},        // not a conjunct
           Case{"SELECT a FROM t, u WHERE t.id = 42", plain},               // a join
           Case{"SELECT unnest(a) FROM t WHERE id = 42", plain},            // a set-returning call
           Case{"SELECT a FROM old WHERE id = 42", plain},                  // children unknown
           Case{"SELECT a FROM other.t WHERE id = 42", plain},              // not in the catalog
           Case{"SELECT a FROM t WHERE id = 42", keyedCatalog("r", "true")},  // inheritance children
           Case{"SELECT a FROM t WHERE id = 42", keyedCatalog("v", "false")}, // a view
           Case{"SELECT a FROM t WHERE id = 42", keyedCatalog("f", "false")}, // a foreign table
           Case{"SELECT a FROM t WHERE id = 42", nullptr},                  // no catalog yet
       }) {
    const Decision d = evaluate(limits(), c.sql, c.stats.get());
    ASSERT_FALSE(d.denied) << c.sql;
    ASSERT_TRUE(d.rewritten_sql.has_value()) << c.sql;
    EXPECT_EQ(*d.rewritten_sql, std::string(c.sql) + "\nLIMIT 1001");
    EXPECT_EQ(d.max_rows, 1000);
  }
}

// A door's own cap (an MCP call's max_rows) is the same rewrite: with no row_limit guard, or one
// whose cap is larger, the text asks for max_rows + 1; where the group's cap is lower, nothing.
TEST(DoorRowCap, ReachesTheSqlAsTheGuardsCapDoes) {
  static const auto open = test::groupsFromYaml("g:\n  guards: []\n");
  const std::string sql = "SELECT * FROM t; SELECT 1 FROM u LIMIT 50; SELECT 2 LIMIT 3";
  const Decision none = evaluate(*open.at("g"), sql, nullptr);
  const auto a = analysis::analyzeUncached(sql);
  EXPECT_EQ(doorRowCap(none, *a, sql, 5),
            "SELECT * FROM t\nLIMIT 6; SELECT 1 FROM u LIMIT 6; SELECT 2 LIMIT 3");
  const std::string read = "SELECT * FROM t LIMIT 5000";
  const Decision capped = evaluate(limits(), read, nullptr);
  ASSERT_EQ(capped.rewritten_sql, "SELECT * FROM t LIMIT 1001");
  const auto b = analysis::analyzeUncached(read);
  // The door's edit wins over the guard's at the same place.
  EXPECT_EQ(doorRowCap(capped, *b, read, 5), "SELECT * FROM t LIMIT 6");
  EXPECT_EQ(doorRowCap(capped, *b, read, 1000), std::nullopt);
  EXPECT_EQ(doorRowCap(capped, *b, read, 5000), std::nullopt);
  EXPECT_EQ(doorRowCap(none, *a, sql, -1), std::nullopt);
}

}  // namespace
}  // namespace pgwarden::guards
