// The result screens' facts as the analysis reads them: which comparisons, on which FROM table,
// with which values; LIMIT without ORDER BY; count/sum over joins with their keys. Shapes it does
// not understand leave nothing (the screens then stay silent).
#include <gtest/gtest.h>

#include "analysis/analysis.h"

namespace pgwarden::guards {
namespace {

using Op = analysis::ScreenComparison::Op;

analysis::ScreenFacts factsOf(std::string_view sql) {
  auto a = analysis::analyzeUncached(sql);
  EXPECT_TRUE(a->ok) << sql;
  return a->statements.empty() ? analysis::ScreenFacts{} : a->statements[0].screen;
}

TEST(ScreenFacts, EqualityInAndLikeWithTheirTables) {
  const auto f = factsOf(
      "SELECT * FROM public.fct_shipments s JOIN carriers c ON c.code = s.carrier "
      "WHERE s.status = 'late' AND c.name IN ('DHL', $2) AND s.note LIKE 'x' AND s.ref ILIKE 'Ab'");
  ASSERT_EQ(f.tables.size(), 2u);
  EXPECT_EQ(f.tables[0].schema, "public");
  EXPECT_EQ(f.tables[0].alias, "s");
  ASSERT_EQ(f.comparisons.size(), 4u);
  EXPECT_EQ(f.comparisons[0].table, 0);
  EXPECT_EQ(f.comparisons[0].column, "status");
  EXPECT_EQ(f.comparisons[0].values[0].text, "late");
  EXPECT_EQ(f.comparisons[1].table, 1);
  ASSERT_EQ(f.comparisons[1].values.size(), 2u);
  EXPECT_EQ(f.comparisons[1].values[1].param, 2);
  EXPECT_EQ(f.comparisons[2].op, Op::kEq);
  EXPECT_TRUE(f.comparisons[3].icase);
  EXPECT_TRUE(f.joined);
}

TEST(ScreenFacts, RangesFlippedAndBetween) {
  const auto f = factsOf("SELECT count(*) FROM t WHERE '2024-01-01' <= d AND n < 5 AND x BETWEEN 1 AND 9");
  ASSERT_EQ(f.comparisons.size(), 4u);
  EXPECT_EQ(f.comparisons[0].op, Op::kLower);  // the constant first: d >= '2024-01-01'
  EXPECT_TRUE(f.comparisons[0].inclusive);
  EXPECT_EQ(f.comparisons[1].op, Op::kUpper);
  EXPECT_FALSE(f.comparisons[1].inclusive);
  EXPECT_EQ(f.comparisons[2].op, Op::kLower);
  EXPECT_EQ(f.comparisons[3].op, Op::kUpper);
  EXPECT_EQ(f.comparisons[3].values[0].text, "9");
  EXPECT_EQ(f.comparisons[0].table, 0);  // one table: unqualified columns are its own
}

TEST(ScreenFacts, PatternsNullTestsAndTheWholeCondition) {
  auto f = factsOf(
      "SELECT id, x * 100 AS x_pct, count(*), t.b::int FROM t WHERE a LIKE 'x%' AND b ILIKE 'a_c' "
      "AND c IS NULL AND d IS NOT NULL AND e = 1 AND lower(g) = 'x'");
  ASSERT_EQ(f.comparisons.size(), 5u);
  EXPECT_EQ(f.comparisons[0].op, Op::kLike);
  EXPECT_EQ(f.comparisons[0].values.at(0).text, "x%");
  EXPECT_EQ(f.comparisons[1].op, Op::kLike);
  EXPECT_TRUE(f.comparisons[1].icase);
  EXPECT_EQ(f.comparisons[3].op, Op::kIsNull);
  EXPECT_EQ(f.comparisons[3].column, "c");
  EXPECT_EQ(f.comparisons[4].op, Op::kNotNull);
  EXPECT_EQ(f.where_conditions, 6);  // lower(g) = 'x' counted, not understood
  EXPECT_EQ(f.outputs, (std::vector<std::string>{"id", "x_pct", "count", "b"}));
  EXPECT_TRUE(factsOf("SELECT *, a FROM t").outputs.empty());
  EXPECT_TRUE(factsOf("SELECT t.* FROM t").outputs.empty());
  EXPECT_TRUE(factsOf("SELECT a FROM t GROUP BY a HAVING count(*) > 1").grouped_filter);
}

TEST(ScreenFacts, WhatIsLeftOut) {
  // OR, NOT IN, wildcard patterns, expressions, sublinks, an ambiguous unqualified column.
  EXPECT_TRUE(factsOf("SELECT * FROM t WHERE a = 'x' OR b = 'y'").comparisons.empty());
  EXPECT_TRUE(factsOf("SELECT * FROM t WHERE a NOT IN ('x')").comparisons.empty());
  EXPECT_TRUE(factsOf("SELECT * FROM t WHERE a LIKE $1").comparisons.empty());
  EXPECT_TRUE(factsOf("SELECT * FROM t WHERE lower(a) = 'x'").comparisons.empty());
  EXPECT_TRUE(factsOf("SELECT * FROM t WHERE a = (SELECT max(b) FROM u)").comparisons.empty());
  EXPECT_EQ(factsOf("SELECT * FROM t, u WHERE a = 'x'").comparisons.at(0).table, -1);
  EXPECT_TRUE(factsOf("SELECT 1").empty());
  EXPECT_TRUE(factsOf("SELECT * FROM t UNION SELECT * FROM u WHERE a = 'x'").empty());
  EXPECT_TRUE(factsOf("UPDATE t SET a = 1 WHERE b = 'x'").empty());
}

TEST(ScreenFacts, LimitWithoutOrderAndJoinAggregates) {
  EXPECT_TRUE(factsOf("SELECT * FROM t LIMIT 10").limit_without_order);
  EXPECT_FALSE(factsOf("SELECT * FROM t ORDER BY a LIMIT 10").limit_without_order);
  EXPECT_FALSE(factsOf("SELECT * FROM t LIMIT $1").limit_without_order);
  const auto f = factsOf("SELECT sum(o.amount) FROM orders o JOIN shipments s ON s.order_id = o.id");
  EXPECT_TRUE(f.count_or_sum);
  ASSERT_EQ(f.join_keys.size(), 2u);
  EXPECT_EQ(f.join_keys[0].table, 1);
  EXPECT_EQ(f.join_keys[0].column, "order_id");
  EXPECT_EQ(f.join_keys[1].column, "id");
  EXPECT_EQ(f.summed_tables, std::vector<int>{0});
  EXPECT_FALSE(factsOf("SELECT count(DISTINCT s.id) FROM orders o JOIN shipments s ON s.order_id = o.id")
                   .count_or_sum);
}

}  // namespace
}  // namespace pgwarden::guards

namespace pgwarden::guards {
namespace {

// A soft-delete column is named by the text, never by its constants: the shape cache swaps a
// constant for another, so a fact read from one would be copied to texts that lack it.
TEST(ScreenFacts, SoftDeleteMentionsAreNamesNotConstants) {
  EXPECT_FALSE(factsOf("SELECT id FROM t WHERE status = 'DELETE'").mentions_soft_delete);
  EXPECT_FALSE(factsOf("SELECT id FROM t WHERE s = E'it\\'s deleted'").mentions_soft_delete);
  EXPECT_FALSE(factsOf("SELECT id FROM t WHERE s = $x$archived$x$ -- removed\n").mentions_soft_delete);
  EXPECT_FALSE(factsOf("SELECT id /* deleted */ FROM t WHERE a = $1").mentions_soft_delete);
  EXPECT_TRUE(factsOf("SELECT id FROM t WHERE deleted_at IS NULL").mentions_soft_delete);
  EXPECT_TRUE(factsOf("SELECT id FROM t WHERE \"is_archived\" = 'x'").mentions_soft_delete);
  EXPECT_TRUE(factsOf("SELECT id FROM t WHERE 'a' = 'b' AND removed").mentions_soft_delete);
}

}  // namespace
}  // namespace pgwarden::guards
