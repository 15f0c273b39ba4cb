// UNKNOWN_VALUE: a filter on a value the catalog does not know for the column, with the known
// values named; near matches by case, whitespace or one typed character, IN lists, LIKE without
// wildcards, a histogram, bound parameters, columns through aliases and joins, the silent cases.
#include <gtest/gtest.h>

#include "screening.h"

namespace pgwarden::screens {
namespace {

using analysis::TableStatsSnapshot;
using screentest::codesOf;
using screentest::column;
using screentest::empty;
using screentest::rows;
using screentest::Screening;
using screentest::singleZero;

const std::string kLate =
    "SELECT count(*) FROM fct_shipments WHERE status = 'late' AND ship_date >= '2024-07-01'";

TEST(UnknownValue, SingleZeroNamesTheKnownValues) {
  Screening r;
  r.result = singleZero();
  auto vs = r.screen(kLate);
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_EQ(vs[0].message.rfind("status has no value 'late'; its values are DELAYED, DELIVERED, RETURNED", 0), 0u)
      << vs[0].message;
  EXPECT_EQ(vs[0].sqlstate, "01000");
  EXPECT_EQ(vs[0].action, guards::Action::kWarn);
  EXPECT_NE(vs[0].detail.find("\"code\":\"UNKNOWN_VALUE\""), std::string::npos);
  EXPECT_NE(vs[0].detail.find("\"known_values\":[\"DELAYED\",\"DELIVERED\",\"RETURNED\"]"), std::string::npos);
  EXPECT_EQ(vs[0].message.find("did you mean"), std::string::npos);  // no synonyms guessed
}

TEST(UnknownValue, ARowsOwnZeroOrNullIsAMatch) {
  Screening r;
  r.result = singleZero();
  // One row came back whose one column holds 0: a shipment with that status exists.
  EXPECT_TRUE(r.screen("SELECT delay_days FROM fct_shipments WHERE status = 'late'").empty());
  r.result.single_zero = false;
  r.result.single_null = true;
  EXPECT_TRUE(r.screen("SELECT ship_date FROM fct_shipments WHERE status = 'late'").empty());
  // The lone NULL of an aggregate over no rows: nothing matched.
  EXPECT_EQ(codesOf(r.screen("SELECT max(ship_date) FROM fct_shipments WHERE status = 'late'")),
            std::vector<std::string>{"UNKNOWN_VALUE"});
}

TEST(UnknownValue, NearMatchByCaseAndWhitespace) {
  Screening r;
  for (const char* v : {"delayed", " Delayed ", "DELAYED  "}) {
    auto vs = r.screen(std::string("SELECT * FROM fct_shipments WHERE status = '") + v + "'");
    ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"}) << v;
    EXPECT_NE(vs[0].message.find("did you mean 'DELAYED'?"), std::string::npos) << vs[0].message;
    EXPECT_EQ(vs[0].hint, "status = 'DELAYED'");
  }
}

TEST(UnknownValue, InListAndLikeWithoutWildcards) {
  Screening r;
  EXPECT_EQ(codesOf(r.screen("SELECT id FROM fct_shipments s WHERE s.status IN ('late', 'overdue')")),
            std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_EQ(codesOf(r.screen("SELECT id FROM fct_shipments WHERE status LIKE 'late'")),
            std::vector<std::string>{"UNKNOWN_VALUE"});
  // ILIKE of a known value in another case matches.
  EXPECT_TRUE(r.screen("SELECT id FROM fct_shipments WHERE status ILIKE 'delayed'").empty());
  // One known value in the list: the emptiness has another cause.
  EXPECT_TRUE(r.screen("SELECT id FROM fct_shipments WHERE status IN ('late', 'DELAYED')").empty());
}

TEST(UnknownValue, PatternsThatMatchNoKnownValue) {
  Screening r;
  auto vs = r.screen("SELECT id FROM fct_shipments WHERE status LIKE 'late%'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_EQ(
      vs[0].message.rfind(
          "No value of status matches LIKE 'late%'; its values are DELAYED, DELIVERED, RETURNED",
          0),
      0u)
      << vs[0].message;
  EXPECT_NE(vs[0].detail.find("\"pattern\":\"late%\""), std::string::npos) << vs[0].detail;
  // Only ILIKE would match: named, and the hint is the ILIKE.
  vs = r.screen("SELECT id FROM fct_shipments WHERE status LIKE 'del%'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_NE(vs[0].message.find("(ILIKE would match 'DELAYED')"), std::string::npos)
      << vs[0].message;
  EXPECT_EQ(vs[0].hint, "status ILIKE 'del%'");
  // A pattern some value matches, with _, %, ILIKE or an escaped wildcard: silent.
  for (const char* sql : {"SELECT id FROM fct_shipments WHERE status LIKE 'DEL%'",
                          "SELECT id FROM fct_shipments WHERE status LIKE '%TURN%'",
                          "SELECT id FROM fct_shipments WHERE status LIKE 'D_LAYED'",
                          "SELECT id FROM fct_shipments WHERE status ILIKE 'del%'",
                          "SELECT id FROM fct_shipments WHERE status LIKE '%'"}) {
    EXPECT_TRUE(r.screen(sql).empty()) << sql;
  }
  // A column whose values are not all known (tracking_no): no claim.
  EXPECT_TRUE(r.screen("SELECT id FROM fct_shipments WHERE tracking_no LIKE 'ZZ%'").empty());
  // Not empty: nothing to explain.
  r.result = rows(3);
  EXPECT_TRUE(r.screen("SELECT id FROM fct_shipments WHERE status LIKE 'late%'").empty());
}

TEST(UnknownValue, OneTypedCharacterIsANearMatch) {
  Screening r;
  auto vs = r.screen("SELECT id FROM fct_shipments WHERE status = 'DELIVRED'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_NE(vs[0].message.find("did you mean 'DELIVERED'?"), std::string::npos) << vs[0].message;
  vs = r.screen("SELECT id FROM fct_shipments WHERE status = 'DELAYDE'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_NE(vs[0].message.find("did you mean 'DELAYED'?"), std::string::npos) << vs[0].message;
  vs = r.screen("SELECT id FROM fct_shipments WHERE status = 'LOST'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_EQ(vs[0].message.find("did you mean"), std::string::npos) << vs[0].message;
}

TEST(UnknownValue, AHistogramThatListsEveryValue) {
  // 80 SKUs, each on a few rows: too many for the MCVs, but ANALYZE's histogram holds them all.
  std::string hist = "{";
  for (int i = 0; i < 80; ++i)
    hist += (i ? "," : "") + std::string("sku-") + std::to_string(100 + i);
  hist += "}";
  Screening r;
  r.stats = TableStatsSnapshot::fromRows({{"public", "items", "400", "id", "integer"}},
                                         {column("items", "sku", "S", "", "", "80", hist),
                                          column("items", "note", "S", "", "", "200", "{a,b,c}")});
  r.result = singleZero();
  auto vs = r.screen("SELECT count(*) FROM items WHERE sku = 'sku-1O5'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_EQ(
      vs[0].message.rfind(
          "sku has no value 'sku-1O5'; its 80 values do not include it (did you mean 'sku-105'?)",
          0),
      0u)
      << vs[0].message;
  EXPECT_NE(vs[0].detail.find("\"value_count\":80"), std::string::npos) << vs[0].detail;
  EXPECT_NE(vs[0].detail.find("\"source\":\"pg_stats_histogram\""), std::string::npos)
      << vs[0].detail;
  EXPECT_TRUE(r.screen("SELECT count(*) FROM items WHERE sku = 'sku-105'").empty());
  EXPECT_EQ(codesOf(r.screen("SELECT count(*) FROM items WHERE sku LIKE 'SKU-%'")),
            std::vector<std::string>{"UNKNOWN_VALUE"});
  // A histogram with fewer bounds than the column has values is a sample: no claim.
  EXPECT_TRUE(r.screen("SELECT count(*) FROM items WHERE note = 'zzz'").empty());
}

TEST(UnknownValue, BoundParameterIsScreenedWithItsValue) {
  Screening r;
  r.params = {std::string("late")};
  r.result = rows(1);
  EXPECT_EQ(codesOf(r.screen("SELECT count(*) FROM fct_shipments WHERE status = $1")),
            std::vector<std::string>{});  // a count that is not zero: nothing matched is false
  r.result = singleZero();
  EXPECT_EQ(codesOf(r.screen("SELECT count(*) FROM fct_shipments WHERE status = $1")),
            std::vector<std::string>{"UNKNOWN_VALUE"});
  r.params = {std::string("DELAYED")};
  EXPECT_TRUE(r.screen("SELECT count(*) FROM fct_shipments WHERE status = $1").empty());
  r.params = {std::nullopt};  // NULL or a binary value: unknown, so silent
  EXPECT_TRUE(r.screen("SELECT count(*) FROM fct_shipments WHERE status = $1").empty());
  r.params = {};
  EXPECT_TRUE(r.screen("SELECT count(*) FROM fct_shipments WHERE status = $1").empty());
}

TEST(UnknownValue, SilentCases) {
  Screening r;
  // The value is there.
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE status = 'DELAYED'").empty());
  // Rows came back.
  r.result = rows(3);
  EXPECT_TRUE(r.screen(kLate).empty());
  r.result = empty();
  // A high-cardinality column: its MCVs are not its values.
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE tracking_no = 'ZZ9'").empty());
  // A column without statistics, a table the catalog does not know.
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE carrier = 'x'").empty());
  EXPECT_TRUE(r.screen("SELECT * FROM elsewhere WHERE status = 'late'").empty());
  // No snapshot yet.
  r.stats = nullptr;
  EXPECT_TRUE(r.screen(kLate).empty());
}

TEST(UnknownValue, ColumnsResolveThroughAliasesAndJoins) {
  Screening r;
  auto vs = r.screen("SELECT o.id FROM orders o JOIN fct_shipments s ON s.order_id = o.id "
                     "WHERE s.status = 'late'");
  EXPECT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  // Unqualified, but only one table has the column.
  EXPECT_EQ(codesOf(r.screen("SELECT o.id FROM orders o, fct_shipments s WHERE status = 'late'")),
            std::vector<std::string>{"UNKNOWN_VALUE"});
}

}  // namespace
}  // namespace pgwarden::screens
