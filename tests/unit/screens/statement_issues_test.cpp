// The statement-only screens that read the catalog or more than one node: NOT IN over a subquery
// whose column holds NULLs, and a WHERE condition on a LEFT JOIN's nullable side.
#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::Row;
using screentest::rows;
using screentest::Screening;

// schema, table, column, type, category, enum, check, mcv, freqs, n_distinct, histogram, analysed,
// unique, leads_btree, not_null, null_frac, references
Row shopCol(std::string table, std::string column, std::string not_null, std::string null_frac,
            std::string references = "", std::string unique = "false") {
  return {"public", table, column, "integer", "N",     "",       "",        "",        "",
          "-0.5",   "",    "true", unique,    "false", not_null, null_frac, references};
}

std::shared_ptr<const analysis::TableStatsSnapshot> shop() {
  return analysis::TableStatsSnapshot::fromRows(
      {{"public", "customers", "400", "id", "integer"},
       {"public", "orders", "3000", "id", "integer"},
       {"public", "payments", "2500", "id", "integer"}},
      {shopCol("customers", "id", "true", "0", "", "true"),
       shopCol("customers", "referrer_id", "false", "0.33"),
       shopCol("customers", "tenant_id", "true", "0", "public.tenants.id"),
       shopCol("orders", "id", "true", "0", "", "true"),
       shopCol("orders", "customer_id", "true", "0", "public.customers.id"),
       shopCol("payments", "order_id", "false", "0", "public.orders.id")});
}

TEST(StatementIssues, NotInASubqueryWhoseColumnHoldsNulls) {
  Screening r;
  r.stats = shop();
  r.result = rows(1);
  auto vs = r.screen(
      "SELECT count(*) FROM customers WHERE id NOT IN (SELECT referrer_id FROM customers)");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"NOT_IN_NULL"});
  EXPECT_EQ(vs[0].hint,
            "SELECT count(*) FROM customers WHERE id NOT IN (SELECT referrer_id FROM customers "
            "WHERE referrer_id IS "
            "NOT NULL)");
  EXPECT_NE(vs[0].detail.find("\"null_rows\":132"), std::string::npos) << vs[0].detail;
  vs = r.screen(
      "SELECT id FROM customers c WHERE NOT (c.id IN (SELECT x.referrer_id FROM customers x WHERE "
      "x.id > 3))");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"NOT_IN_NULL"});
  EXPECT_EQ(vs[0].hint,
            "SELECT id FROM customers c WHERE NOT (c.id IN (SELECT x.referrer_id FROM customers x "
            "WHERE x.id > 3 AND "
            "x.referrer_id IS NOT NULL))");
  // A NOT NULL column, a nullable one without NULLs, NULLs filtered out, IN, NOT EXISTS: silent.
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)")
          .empty());
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM orders WHERE id NOT IN (SELECT order_id FROM payments)")
          .empty());
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM customers WHERE id NOT IN (SELECT referrer_id FROM customers "
               "WHERE referrer_id IS NOT NULL)")
          .empty());
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM customers WHERE id NOT IN (SELECT referrer_id FROM customers "
               "WHERE referrer_id > 5)")
          .empty());
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM customers WHERE id IN (SELECT referrer_id FROM customers)")
          .empty());
  // Unknown to the catalog: silent.
  r.stats = nullptr;
  EXPECT_TRUE(
      r.screen("SELECT count(*) FROM customers WHERE id NOT IN (SELECT referrer_id FROM customers)")
          .empty());
}

TEST(StatementIssues, AWhereConditionOnTheNullableSideOfALeftJoin) {
  Screening r;
  r.stats = shop();
  r.result = rows(4);
  auto vs = r.screen(
      "SELECT c.id, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
      "WHERE o.customer_id > 10 GROUP BY c.id");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"LEFT_JOIN_FILTERED"});
  EXPECT_EQ(vs[0].hint,
            "SELECT c.id, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
            "AND o.customer_id > 10 GROUP BY c.id");
  vs = r.screen(
      "SELECT c.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
      "WHERE o.id IN (1, 2) AND c.id > 3");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"LEFT_JOIN_FILTERED"});
  EXPECT_EQ(vs[0].hint,
            "SELECT c.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
            "AND o.id IN (1, 2) WHERE c.id > 3");
  // RIGHT JOIN: the left side is the nullable one; not first in WHERE: flagged without a hint.
  vs = r.screen(
      "SELECT o.id FROM orders o RIGHT JOIN customers c ON o.customer_id = c.id WHERE c.id > 1 "
      "AND o.id = 4");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"LEFT_JOIN_FILTERED"});
  EXPECT_EQ(vs[0].hint, "");
  // The preserved side, IS NULL (an anti-join), IS DISTINCT FROM, an inner or a full join: silent.
  EXPECT_TRUE(
      r.screen(
           "SELECT c.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE c.id > 3")
          .empty());
  EXPECT_TRUE(r.screen("SELECT c.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
                       "WHERE o.id IS NULL")
                  .empty());
  EXPECT_TRUE(r.screen("SELECT c.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
                       "WHERE o.id IS DISTINCT FROM 3")
                  .empty());
  EXPECT_TRUE(
      r.screen("SELECT c.id FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.id = 3")
          .empty());
  EXPECT_TRUE(
      r.screen(
           "SELECT c.id FROM customers c FULL JOIN orders o ON o.customer_id = c.id WHERE o.id = 3")
          .empty());
}

TEST(ForeignKeyMismatch, AJoinOnTheOwnKeyInsteadOfTheForeignKey) {
  Screening r;
  r.stats = shop();
  r.result = rows(1);
  auto vs = r.screen("SELECT count(o.id) FROM orders o JOIN customers c ON c.id = o.id");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"FOREIGN_KEY_MISMATCH"});
  EXPECT_EQ(vs[0].hint,
            "SELECT count(o.id) FROM orders o JOIN customers c ON c.id = o.customer_id");
  EXPECT_NE(vs[0].detail.find("\"foreign_key\":\"public.orders.customer_id\""), std::string::npos)
      << vs[0].detail;
  // Joined on the foreign key, or on columns no foreign key relates: silent.
  EXPECT_TRUE(r.screen("SELECT count(o.id) FROM orders o JOIN customers c ON c.id = o.customer_id")
                  .empty());
  EXPECT_TRUE(
      r.screen("SELECT count(c.id) FROM customers c JOIN customers r ON r.id = c.referrer_id")
          .empty());
}

// The statement-only screens speak on any result, and their hint is the statement corrected.
TEST(StatementIssues, NullComparisonAndNotInNullWithTheCorrectedStatement) {
  Screening r;
  r.result = rows(3);
  auto vs = r.screen("SELECT id FROM fct_shipments WHERE status = NULL OR status <> null");
  ASSERT_EQ(codesOf(vs), (std::vector<std::string>{"NULL_COMPARISON", "NULL_COMPARISON"}));
  EXPECT_EQ(vs[0].hint, "SELECT id FROM fct_shipments WHERE status IS NULL OR status <> null");
  EXPECT_EQ(vs[1].hint, "SELECT id FROM fct_shipments WHERE status = NULL OR status IS NOT NULL");
  vs = r.screen("SELECT count(*) FROM fct_shipments WHERE status NOT IN ('A', NULL)");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"NOT_IN_NULL"});
  EXPECT_EQ(vs[0].hint, "SELECT count(*) FROM fct_shipments WHERE status NOT IN ('A')");
  vs = r.screen("SELECT count(*) FROM fct_shipments WHERE status NOT IN (NULL,  'A')");
  EXPECT_EQ(vs.at(0).hint, "SELECT count(*) FROM fct_shipments WHERE status NOT IN ('A')");
  // IS NULL, IN with a NULL, a NULL compared by IS DISTINCT FROM: correct, silent.
  EXPECT_TRUE(r.screen("SELECT id FROM fct_shipments WHERE status IS NULL").empty());
  EXPECT_TRUE(r.screen("SELECT id FROM fct_shipments WHERE status IN ('A', NULL)").empty());
  EXPECT_TRUE(r.screen("SELECT id FROM fct_shipments WHERE status IS DISTINCT FROM NULL").empty());
}

TEST(StatementIssues, IntegerDivisionOfCountsAndDistinctMeasures) {
  Screening r;
  r.result = rows(1);
  auto vs = r.screen("SELECT count(*) FILTER (WHERE status = 'DELAYED') / count(*) FROM fct_shipments");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"INTEGER_DIVISION"});
  EXPECT_EQ(vs[0].hint, "SELECT count(*) FILTER (WHERE status = 'DELAYED') * 1.0 / count(*) FROM fct_shipments");
  EXPECT_TRUE(r.screen("SELECT count(*) * 1.0 / count(*) FROM fct_shipments").empty());
  EXPECT_TRUE(r.screen("SELECT count(*) / 2 FROM fct_shipments").empty());
  // sum() of a column whose type is not known to be an integer: silent.
  EXPECT_TRUE(r.screen("SELECT sum(order_id) / count(*) FROM fct_shipments").empty());
  vs = r.screen("SELECT sum(DISTINCT order_id) FROM fct_shipments");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"DISTINCT_MEASURE"});
  EXPECT_EQ(vs[0].hint, "SELECT sum(order_id) FROM fct_shipments");
  EXPECT_TRUE(r.screen("SELECT count(DISTINCT order_id) FROM fct_shipments").empty());
}

TEST(StatementIssues, CountStarOverTheUnmatchedRowsOfALeftJoin) {
  Screening r;
  r.result = rows(5);
  auto vs = r.screen(
      "SELECT o.id, count(*) FROM orders o LEFT JOIN fct_shipments s ON s.order_id = o.id GROUP BY o.id");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"OUTER_JOIN_COUNT"});
  EXPECT_EQ(vs[0].hint,
            "SELECT o.id, count(s.order_id) FROM orders o LEFT JOIN fct_shipments s ON s.order_id = o.id "
            "GROUP BY o.id");
  // Grouped by the nullable side, an inner join, no GROUP BY: silent.
  EXPECT_TRUE(r.screen("SELECT s.status, count(*) FROM orders o LEFT JOIN fct_shipments s "
                       "ON s.order_id = o.id GROUP BY s.status")
                  .empty());
  EXPECT_TRUE(r.screen("SELECT o.id, count(*) FROM orders o JOIN fct_shipments s ON s.order_id = o.id "
                       "GROUP BY o.id")
                  .empty());
}

}  // namespace
}  // namespace pgwarden::screens
