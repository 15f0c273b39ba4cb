// Each result screen on parsed statements, a made-up catalog snapshot and a result summary: when
// it speaks, what it says, and the cases where it must stay silent.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "guards/codes.h"
#include "screening.h"
#include "screens/screen.h"

namespace pgwarden::screens {
namespace {

using guards::TableStatsSnapshot;
using screentest::codesOf;
using screentest::column;
using screentest::empty;
using screentest::rows;
using screentest::Screening;
using screentest::shipmentStats;
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

TEST(OutOfRange, RangePastTheDataEnd) {
  Screening r;
  r.result = singleZero();
  auto vs = r.screen("SELECT count(*) FROM fct_shipments WHERE status = 'DELAYED' AND ship_date >= '2026-07-01'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"OUT_OF_RANGE"});
  EXPECT_EQ(vs[0].message.rfind("ship_date data runs from 2023-01-01 to 2026-06-30; your range starts 2026-07-01", 0), 0u);
  EXPECT_EQ(codesOf(r.screen("SELECT count(*) FROM fct_shipments WHERE ship_date < DATE '2022-12-01'")),
            std::vector<std::string>{"OUT_OF_RANGE"});
  EXPECT_EQ(codesOf(r.screen("SELECT count(*) FROM fct_shipments WHERE ship_date BETWEEN '2027-01-01' AND '2027-02-01'")),
            std::vector<std::string>{"OUT_OF_RANGE"});
  EXPECT_EQ(codesOf(r.screen("SELECT count(*) FROM fct_shipments WHERE '2026-08-01' < ship_date")),
            std::vector<std::string>{"OUT_OF_RANGE"});
}

TEST(OutOfRange, SilentInsideTheDataOrWithoutBounds) {
  Screening r;
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE ship_date >= '2026-06-30'").empty());
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE ship_date >= date_trunc('month', now())")
                  .empty());
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE ship_date >= 'yesterday'").empty());
  r.result = rows(2);
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE ship_date >= '2026-07-01'").empty());
}

TEST(OutOfRange, BoundsReadThroughTheIndexWhenPgStatsHasNone) {
  // Never analysed: pg_stats is empty; ship_date leads a btree index, delivered_on leads none.
  auto fresh = TableStatsSnapshot::fromRows(
      {{"public", "fct_shipments", "50000", "ship_date", "date"}},
      {{"public", "fct_shipments", "ship_date", "date", "D", "", "", "", "", "", "", "false", "false", "true"},
       {"public", "fct_shipments", "delivered_on", "date", "D", "", "", "", "", "", "", "false", "false", "false"}});
  Screening r;
  r.result = singleZero();
  r.stats = fresh;
  EXPECT_TRUE(r.screen("SELECT count(*) FROM fct_shipments WHERE ship_date >= '2026-07-01'").empty());
  r.stats = fresh->withIndexBounds({{"public", "fct_shipments", "ship_date", "2023-01-01", "2026-06-30"}}, nullptr);
  auto vs = r.screen("SELECT count(*) FROM fct_shipments WHERE ship_date >= '2026-07-01'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"OUT_OF_RANGE"});
  EXPECT_EQ(vs[0].message.rfind("ship_date data runs from 2023-01-01 to 2026-06-30; your range starts 2026-07-01", 0), 0u);
  EXPECT_NE(vs[0].detail.find("\"bounds_from\":\"index\""), std::string::npos) << vs[0].detail;
  EXPECT_TRUE(r.screen("SELECT count(*) FROM fct_shipments WHERE delivered_on >= '2026-07-01'").empty());
  // With statistics, the detail says so.
  r.stats = shipmentStats();
  vs = r.screen("SELECT count(*) FROM fct_shipments WHERE ship_date >= '2026-07-01'");
  ASSERT_EQ(vs.size(), 1u);
  EXPECT_NE(vs[0].detail.find("\"bounds_from\":\"pg_stats\""), std::string::npos) << vs[0].detail;
}

TEST(ArbitraryRows, LimitWithoutOrderThatFilledUp) {
  Screening r;
  r.result = rows(10);
  auto vs = r.screen("SELECT * FROM fct_shipments WHERE carrier = 'x' LIMIT 10");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"ARBITRARY_ROWS"});
  EXPECT_NE(vs[0].message.find("Add ORDER BY"), std::string::npos);
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE carrier = 'x' ORDER BY id LIMIT 10").empty());
  r.result = rows(4);
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE carrier = 'x' LIMIT 10").empty());
  r.result = rows(1);
  EXPECT_TRUE(r.screen("SELECT count(*) FROM fct_shipments LIMIT 1").empty());
}

TEST(PartialResult, CutByTheRowCapSuggestsTheServerAggregate) {
  Screening r;
  r.result = {1000, false, true, 1000};
  auto vs = r.screen("SELECT status FROM fct_shipments WHERE ship_date > '2024-01-01'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"PARTIAL_RESULT"});
  EXPECT_NE(vs[0].message.find("first 1000 rows"), std::string::npos);
  EXPECT_EQ(vs[0].hint, "SELECT count(*) FROM (SELECT status FROM fct_shipments WHERE ship_date > '2024-01-01') AS q");
}

TEST(PartialResult, HintIsRunnableForABoundToolStatement) {
  // An operator tool's text: $n bound, pgwarden's LIMIT (its cap + 1) appended.
  Screening r;
  r.result = {500, false, true, 500};
  r.params = {std::string("UPS"), std::string("2024-01-01"), std::nullopt};
  auto vs = r.screen(
      "SELECT status FROM fct_shipments WHERE carrier = $1 AND ship_date > $2::date "
      "AND note IS DISTINCT FROM $3 AND tag <> '$1' -- $2\nLIMIT 501");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"PARTIAL_RESULT"});
  EXPECT_EQ(vs[0].hint,
            "SELECT count(*) FROM (SELECT status FROM fct_shipments WHERE carrier = 'UPS' AND "
            "ship_date > "
            "'2024-01-01'::date AND note IS DISTINCT FROM NULL AND tag <> '$1' -- $2\n) AS q");
  // A quote in a value is doubled; a $n without a value gives the generic hint.
  r.params = {std::string("O'Hare")};
  vs = r.screen("SELECT status FROM fct_shipments WHERE carrier = $1 LIMIT 501");
  EXPECT_EQ(
      vs[0].hint,
      "SELECT count(*) FROM (SELECT status FROM fct_shipments WHERE carrier = 'O''Hare') AS q");
  r.params.clear();
  vs = r.screen("SELECT status FROM fct_shipments WHERE carrier = $1 LIMIT 501");
  EXPECT_EQ(vs[0].hint.rfind("SELECT count(*), count(DISTINCT <column>)", 0), 0u) << vs[0].hint;
}

TEST(Unfiltered, TheWholeBigTable) {
  Screening r;
  r.result = rows(49000);
  auto vs = r.screen("SELECT * FROM fct_shipments");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNFILTERED"});
  EXPECT_NE(vs[0].message.find("not a filtered subset"), std::string::npos);
  EXPECT_EQ(vs[0].hint, "WHERE ship_date >= DATE '2026-06-30' - 7");
  // A filtered read, a small table, a small part of the table: silent.
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments WHERE carrier = 'x'").empty());
  r.result = rows(12);
  EXPECT_TRUE(r.screen("SELECT * FROM dim_region").empty());
  r.result = rows(100);
  EXPECT_TRUE(r.screen("SELECT * FROM fct_shipments").empty());
}

TEST(FanoutJoin, CountOverAManyToManyJoin) {
  Screening r;
  r.result = rows(1);
  auto vs = r.screen("SELECT count(*) FROM fct_shipments s JOIN orders o ON o.customer_id = s.order_id");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"FANOUT_JOIN"});
  EXPECT_NE(vs[0].message.find("count(*), sum() and avg() count some rows more than once"),
            std::string::npos);
  // sum of the one side's amounts over the many side multiplies them.
  EXPECT_EQ(codesOf(r.screen("SELECT sum(o.customer_id) FROM orders o JOIN fct_shipments s ON s.order_id = o.id")),
            std::vector<std::string>{"FANOUT_JOIN"});
  // Joined on a unique key, counting the many side: right.
  EXPECT_TRUE(r.screen("SELECT count(*) FROM fct_shipments s JOIN orders o ON o.id = s.order_id").empty());
  EXPECT_TRUE(r.screen("SELECT count(DISTINCT s.id) FROM fct_shipments s JOIN orders o ON o.customer_id = s.order_id").empty());
}

TEST(Config, OffDenyAndReasonOverrides) {
  auto groups = guards::parsePolicyGroups(YAML::Load(R"(
g:
  result_screens: {UNKNOWN_VALUE: deny, OUT_OF_RANGE: off}
  reasons:
    UNKNOWN_VALUE: "No such {column}: {values}. Try one of {known_values}."
)"));
  Screening r;
  r.group = groups.at("g").get();
  r.result = singleZero();
  auto vs = r.screen("SELECT count(*) FROM fct_shipments WHERE status = 'late' AND ship_date > '2027-01-01'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"UNKNOWN_VALUE"});
  EXPECT_EQ(vs[0].action, guards::Action::kDeny);
  EXPECT_EQ(vs[0].message, "No such status: late. Try one of DELAYED, DELIVERED, RETURNED.");
  EXPECT_THROW(guards::parsePolicyGroups(YAML::Load("g: {result_screens: {NOPE: warn}}")), std::exception);
  EXPECT_THROW(guards::parsePolicyGroups(YAML::Load("g: {result_screens: {UNFILTERED: loud}}")), std::exception);
}

TEST(WorthScreening, OnlyShapesThatCanBeFlagged) {
  auto a = guards::analyzeUncached("SELECT id, status FROM fct_shipments WHERE id > 5 ORDER BY id LIMIT 5");
  // A range on a column is a comparison: worth a look (it may be out of range when empty).
  EXPECT_TRUE(worthScreening(a->statements[0]));
  EXPECT_FALSE(worthScreening(guards::analyzeUncached("SELECT 1")->statements[0]));
  // pgbench -S: worth a look by shape, but one row that is not a zero cannot make any screen speak.
  const auto pgbench = guards::analyzeUncached("SELECT abalance FROM pgbench_accounts WHERE aid = $1");
  EXPECT_TRUE(worthScreening(pgbench->statements[0]));
  // One row that is not a zero: only SOFT_DELETED_ROWS could speak, and only once some table of
  // the catalog has a soft-delete column (until then, pgbench -S is never screened).
  EXPECT_EQ(maySpeak(pgbench->statements[0], rows(1)), guards::softDeleteColumnsSeen());
  ASSERT_TRUE(guards::parseColumnRow({"public", "users", "deleted_at", "timestamp with time zone",
                                      "D", "", "", "", "", "-0.5", "", "true", "false", "false",
                                      "false", "0.9", ""}));
  EXPECT_TRUE(guards::softDeleteColumnsSeen());
  EXPECT_TRUE(maySpeak(pgbench->statements[0], rows(1)));
  EXPECT_FALSE(maySpeak(
      guards::analyzeUncached("SELECT 1 FROM t WHERE deleted_at IS NULL AND id = 3")->statements[0],
      rows(1)));
  EXPECT_TRUE(maySpeak(pgbench->statements[0], empty()));
  EXPECT_FALSE(worthScreening(guards::analyzeUncached("SET search_path = public")->statements[0]));
  EXPECT_FALSE(worthScreening(
      guards::analyzeUncached("SELECT count(*) FROM (VALUES (1)) v(x) GROUP BY x")->statements[0]));
}

}  // namespace
}  // namespace pgwarden::screens

namespace pgwarden::screens {
namespace {

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

TEST(TimestampDateBound, ARangeEndingAtABareDateOnATimestamp) {
  Screening r;
  r.stats = TableStatsSnapshot::fromRows(
      {{"public", "events", "5000", "", ""}},
      {{"public", "events", "at", "timestamp without time zone", "D", "", "", "", "", "-0.9", "", "true", "false"},
       {"public", "events", "day", "date", "D", "", "", "", "", "-0.1", "", "true", "false"}});
  r.result = rows(1);
  auto vs = r.screen("SELECT count(*) FROM events WHERE at BETWEEN '2024-01-01' AND '2024-02-29'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"TIMESTAMP_DATE_BOUND"});
  EXPECT_EQ(vs[0].hint, "SELECT count(*) FROM events WHERE at >= '2024-01-01' AND at < '2024-03-01'");
  vs = r.screen("SELECT count(*) FROM events WHERE at <= '2024-12-31' AND day > '2024-01-01'");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"TIMESTAMP_DATE_BOUND"});
  EXPECT_EQ(vs[0].hint, "SELECT count(*) FROM events WHERE at < '2025-01-01' AND day > '2024-01-01'");
  // A date column, a time of day, a cast to date, an exclusive end: silent.
  EXPECT_TRUE(r.screen("SELECT count(*) FROM events WHERE day <= '2024-12-31'").empty());
  EXPECT_TRUE(r.screen("SELECT count(*) FROM events WHERE at <= '2024-12-31 23:59:59'").empty());
  EXPECT_TRUE(r.screen("SELECT count(*) FROM events WHERE at::date <= '2024-12-31'").empty());
  EXPECT_TRUE(r.screen("SELECT count(*) FROM events WHERE at < '2024-12-31'").empty());
}

}  // namespace
}  // namespace pgwarden::screens
