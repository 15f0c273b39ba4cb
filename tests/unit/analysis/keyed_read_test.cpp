// analysis: keyed reads. A SELECT of one table whose WHERE equates a bare column with a literal
// names that column; every way one table row can become several result rows, and every way the
// comparison can match more than the equal value, leaves it out.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "analysis/analysis.h"

namespace pgwarden::analysis {
namespace {

KeyedRead keyedOf(std::string_view sql) {
  auto a = analyzeUncached(sql);
  EXPECT_TRUE(a->ok) << sql << ": " << a->error;
  return a->statements.empty() ? KeyedRead{} : a->statements[0].keyed;
}

using Columns = std::vector<std::string>;

void expectNotKeyed(std::initializer_list<const char*> texts) {
  for (const char* sql : texts) EXPECT_TRUE(keyedOf(sql).columns.empty()) << sql;
}

TEST(KeyedRead, NamesTheTableAndEachColumnEquatedToALiteral) {
  KeyedRead k = keyedOf("SELECT abalance FROM pgbench_accounts WHERE aid = 24431");
  EXPECT_EQ(k.schema, "");
  EXPECT_EQ(k.table, "pgbench_accounts");
  EXPECT_EQ(k.columns, Columns{"aid"});

  k = keyedOf("SELECT * FROM shop.Orders o WHERE 'x' = o.code AND o.id = 7 AND o.total > 5 "
              "ORDER BY o.id, 1 LIMIT ALL");
  EXPECT_EQ(k.schema, "shop");
  EXPECT_EQ(k.table, "orders");
  EXPECT_EQ(k.columns, (Columns{"code", "id"}));

  k = keyedOf("SELECT DISTINCT id, name::text, 1 FROM \"Users\" WHERE \"Email\" = 'a@b.c' AND "
              "(id = 1 OR id = 2)");
  EXPECT_EQ(k.table, "Users");
  EXPECT_EQ(k.columns, Columns{"Email"});
  EXPECT_EQ(k.params, std::vector<int>{0});

  // A parameter is a key too, marked as such: its type may be one the client declared.
  k = keyedOf("SELECT a FROM t WHERE id = $2 AND code = 'x' AND $1 = t.grp");
  EXPECT_EQ(k.columns, (Columns{"id", "code", "grp"}));
  EXPECT_EQ(k.params, (std::vector<int>{2, 0, 1}));
}

TEST(KeyedRead, LeavesOutWhatCanReturnManyRowsForOneTableRow) {
  expectNotKeyed({
           "SELECT a FROM t WHERE id = 1 UNION ALL SELECT a FROM t WHERE id = 1",
           "WITH t AS (SELECT id FROM big) SELECT * FROM t WHERE id = 1",
           "SELECT * FROM t, u WHERE t.id = 1",
           "SELECT * FROM t JOIN u USING (id) WHERE t.id = 1",
           "SELECT * FROM (SELECT * FROM t) s WHERE id = 1",
           "SELECT * FROM generate_series(1, 10) g WHERE g = 1",
           "SELECT * FROM t TABLESAMPLE SYSTEM (50) WHERE id = 1",
           "SELECT generate_series(1, 5000), a FROM t WHERE id = 1",
           "SELECT a + b FROM t WHERE id = 1",
           "SELECT (SELECT x FROM u) FROM t WHERE id = 1",
           "SELECT a FROM t WHERE id = 1 ORDER BY generate_series(1, 3)",
           "SELECT DISTINCT ON (lower(a)) a FROM t WHERE id = 1",
           "SELECT a, b FROM t WHERE id = 1 GROUP BY ROLLUP (a, b)",
           "SELECT count(*) FROM t WHERE id = 1",
           "SELECT a, rank() OVER w FROM t WHERE id = 1 WINDOW w AS (ORDER BY a)",
           "SELECT a INTO copy FROM t WHERE id = 1",
  });
}

TEST(KeyedRead, LeavesOutComparisonsThatMatchMoreThanOneValue) {
  expectNotKeyed({
           "SELECT a FROM t",
           "SELECT a FROM t WHERE created::date = '2024-01-01'",
           "SELECT a FROM t WHERE CAST(id AS int) = 5",
           "SELECT a FROM t WHERE id = 5::real",
           "SELECT a FROM t WHERE id = $1::float8",
           "SELECT a FROM t WHERE id = NULL",
           "SELECT a FROM t WHERE id IN (1, 2)",
           "SELECT a FROM t WHERE id = 1 OR b = 2",
           "SELECT a FROM t WHERE NOT (id = 1)",
           "SELECT a FROM t WHERE id <> 1",
           "SELECT a FROM t WHERE id >= 1",
           "SELECT a FROM t WHERE code LIKE 'abc'",
           "SELECT a FROM t WHERE code ILIKE 'abc'",
           "SELECT a FROM t WHERE id = other_id",
           "SELECT a FROM t WHERE lower(code) = 'x'",
           "SELECT a FROM t WHERE id + 0 = 1",
           "SELECT a FROM t x WHERE y.id = 1",
           "SELECT a FROM t WHERE s.t.id = 1",
  });
}

TEST(KeyedRead, OnlyTheSelectItselfAndNotWhatItWraps) {
  expectNotKeyed({
           "EXPLAIN SELECT a FROM t WHERE id = 1",
           "PREPARE p AS SELECT a FROM t WHERE id = 1",
           "DECLARE c CURSOR FOR SELECT a FROM t WHERE id = 1",
           "COPY (SELECT a FROM t WHERE id = 1) TO STDOUT",
           "UPDATE t SET a = 1 WHERE id = 1",
  });
}

}  // namespace
}  // namespace pgwarden::analysis
