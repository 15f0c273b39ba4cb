// Column statistics as the catalog query returns them: array literals, CHECK IN-lists, the rule
// for "these are all the values", and the data bounds.
#include <gtest/gtest.h>

#include "analysis/column_stats.h"
#include "guards/policy.h"

namespace pgwarden::guards {
namespace {

std::vector<std::string> row(std::string mcv, std::string freqs, std::string n_distinct,
                             std::string histogram = "", std::string category = "S") {
  return {"public", "t", "c", "text", category, "", "", mcv, freqs, n_distinct, histogram, "true", "false"};
}

TEST(ArrayText, QuotedEscapedAndNull) {
  auto v = analysis::parseArrayText(R"({a,"b c","say \"hi\"",NULL,"NULL"})");
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, (std::vector<std::string>{"a", "b c", "say \"hi\"", "NULL"}));
  EXPECT_EQ(analysis::parseArrayText("{}")->size(), 0u);
  EXPECT_FALSE(analysis::parseArrayText("{\"open"));
  EXPECT_FALSE(analysis::parseArrayText("{{1,2},{3,4}}"));
  EXPECT_FALSE(analysis::parseArrayText("not an array"));
}

TEST(CheckInList, AsPgGetConstraintdefPrintsIt) {
  EXPECT_EQ(
      analysis::checkInList(
          "CHECK ((status = ANY (ARRAY['DELAYED'::text, 'DELIVERED'::text, 'it''s'::text])))"),
      (std::vector<std::string>{"DELAYED", "DELIVERED", "it's"}));
  EXPECT_EQ(analysis::checkInList("CHECK (((status)::text = ANY ((ARRAY['A'::character varying, "
                                  "'B'::character varying])::text[])))"),
            (std::vector<std::string>{"A", "B"}));
  EXPECT_TRUE(analysis::checkInList("CHECK ((weight > (0)::numeric))").empty());
  EXPECT_TRUE(
      analysis::checkInList("CHECK (((status = ANY (ARRAY['A'::text])) OR (id > 5)))").empty());
}

TEST(KnownValues, McvsCoveringEveryRowOfAFewValues) {
  auto c = analysis::parseColumnRow(row("{DELIVERED,DELAYED,RETURNED}", "{0.6,0.2,0.2}", "3"));
  ASSERT_TRUE(c);
  ASSERT_NE(c->stats.knownValues(), nullptr);
  EXPECT_EQ(c->stats.knownValues()->size(), 3u);
}

TEST(KnownValues, SilentWhenMcvsDoNotCoverOrValuesAreMany) {
  EXPECT_EQ(analysis::parseColumnRow(row("{a,b}", "{0.5,0.3}", "5"))->stats.knownValues(), nullptr);
  EXPECT_EQ(analysis::parseColumnRow(row("{a,b}", "{0.6,0.4}", "-0.5"))->stats.knownValues(),
            nullptr);
  EXPECT_EQ(analysis::parseColumnRow(row("", "", ""))->stats.knownValues(), nullptr);
}

TEST(KnownValues, EnumLabelsAndCheckListComeFirst) {
  auto r = row("{a}", "{1}", "1");
  r[5] = "{low,medium,high}";
  EXPECT_EQ(*analysis::parseColumnRow(r)->stats.knownValues(),
            (std::vector<std::string>{"low", "medium", "high"}));
  r[5] = "";
  r[6] = "CHECK ((c = ANY (ARRAY['x'::text, 'y'::text])))";
  EXPECT_EQ(*analysis::parseColumnRow(r)->stats.knownValues(),
            (std::vector<std::string>{"x", "y"}));
}

TEST(Bounds, DatesFromHistogramAndMcvs) {
  auto c = analysis::parseColumnRow(
      row("{2026-06-30}", "{0.01}", "-0.2", "{2023-01-01,2026-06-29}", "D"));
  std::string lo, hi;
  ASSERT_TRUE(c->stats.bounds(&lo, &hi));
  EXPECT_EQ(lo, "2023-01-01");
  EXPECT_EQ(hi, "2026-06-30");
  EXPECT_EQ(analysis::compareValues('D', "2026-07-01", "2026-06-30 23:59:59+00"), 1);
  EXPECT_FALSE(analysis::compareValues('D', "07/01/2026", "2026-06-30"));
  EXPECT_EQ(analysis::compareValues('N', "10", "9.5"), 1);
  EXPECT_FALSE(analysis::parseColumnRow(row("{a}", "{1}", "1", "", "S"))->stats.bounds(&lo, &hi));
}

TEST(ColumnRow, MalformedRowsAreSkipped) {
  EXPECT_FALSE(analysis::parseColumnRow({"public", "t"}));
  EXPECT_FALSE(analysis::parseColumnRow({"", "t", "c", "", "", "", "", "", "", "", "", "", ""}));
}

// A date column of `table` that leads a btree index; pg_stats has no row for it (never analysed).
std::vector<std::string> indexedDate(std::string table, std::string column, std::string leads = "true") {
  return {"public", table, column, "date", "D", "", "", "", "", "", "", "false", "false", leads};
}

TEST(ColumnRow, NullabilityNullShareAndForeignKey) {
  auto r = analysis::parseColumnRow({"public", "orders", "customer_id", "integer", "N", "", "", "",
                                     "", "-0.1", "", "true", "false", "false", "false", "0.04",
                                     "public.customers.id"});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->stats.not_null);
  EXPECT_DOUBLE_EQ(r->stats.null_frac, 0.04);
  EXPECT_EQ(r->stats.references, "public.customers.id");
  // A row of the older shape (no such columns): nothing known, nothing assumed.
  r = analysis::parseColumnRow(row("", "", "-1"));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->stats.not_null);
  EXPECT_EQ(r->stats.null_frac, 0);
  EXPECT_EQ(r->stats.references, "");
}

TEST(IndexBounds, OnlyForIndexedNumbersAndDatesWithoutStats) {
  auto c = analysis::parseColumnRow(indexedDate("t", "ship_date"));
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->stats.leads_btree);
  EXPECT_TRUE(c->stats.needsIndexBounds());
  std::string lo, hi;
  EXPECT_FALSE(c->stats.bounds(&lo, &hi));  // nothing read yet: silent
  EXPECT_FALSE(
      analysis::parseColumnRow(indexedDate("t", "ship_date", "false"))->stats.needsIndexBounds());
  // Analysed with a histogram: pg_stats answers, no probe.
  auto analysed = indexedDate("t", "ship_date");
  analysed[10] = "{2023-01-01,2026-06-30}";
  analysed[11] = "true";
  EXPECT_FALSE(analysis::parseColumnRow(analysed)->stats.needsIndexBounds());
  // Analysed, but every value NULL or the sample empty: no bounds from pg_stats, so the index.
  analysed[10] = "";
  EXPECT_TRUE(analysis::parseColumnRow(analysed)->stats.needsIndexBounds());
  EXPECT_TRUE(analysis::boundableType('N', "numeric(12,2)"));
  EXPECT_TRUE(analysis::boundableType('D', "timestamp with time zone"));
  EXPECT_FALSE(analysis::boundableType('N', "money"));
  EXPECT_FALSE(analysis::boundableType('N', "oid"));
  EXPECT_FALSE(analysis::boundableType('D', "time without time zone"));
}

TEST(IndexBounds, StatsFirstThenTheIndexAndItsSource) {
  analysis::ColumnStats s = analysis::parseColumnRow(indexedDate("t", "ship_date"))->stats;
  s.index_low = "2023-01-01";
  s.index_high = "2026-06-30";
  std::string lo, hi;
  const char* source = nullptr;
  ASSERT_TRUE(s.bounds(&lo, &hi, &source));
  EXPECT_EQ(lo, "2023-01-01");
  EXPECT_EQ(hi, "2026-06-30");
  EXPECT_STREQ(source, "index");
  s.analyzed = true;
  s.histogram = {"2024-01-01", "2024-12-31"};
  ASSERT_TRUE(s.bounds(&lo, &hi, &source));
  EXPECT_EQ(lo, "2024-01-01");
  EXPECT_STREQ(source, "pg_stats");
  // Values that do not read as the type, or come in the wrong order, are not bounds.
  s.histogram.clear();
  s.index_low = "soon";
  EXPECT_FALSE(s.bounds(&lo, &hi));
  s.index_low = "2027-01-01";
  EXPECT_FALSE(s.bounds(&lo, &hi));
}

TEST(IndexBounds, ProbeQueryQuotesEveryIdentifier) {
  EXPECT_EQ(analysis::boundsProbeQuery("public", "Ship \"Log\"", "day", 200),
            "SET LOCAL statement_timeout = 200; SELECT min(\"day\")::text, max(\"day\")::text"
            " FROM \"public\".\"Ship \"\"Log\"\"\"");
  std::string lo, hi;
  EXPECT_TRUE(analysis::parseBoundsRow({"1", "99.5"}, &lo, &hi));
  EXPECT_EQ(hi, "99.5");
  EXPECT_FALSE(
      analysis::parseBoundsRow({"", ""}, &lo, &hi));  // an empty table: min and max are NULL
  EXPECT_FALSE(analysis::parseBoundsRow({"1", std::string(100, '9')}, &lo, &hi));
  EXPECT_FALSE(analysis::parseBoundsRow({"1"}, &lo, &hi));
}

TEST(IndexBounds, ProbesAreBoundedAndRotate) {
  std::vector<std::vector<std::string>> tables, columns;
  for (char t = 'a'; t <= 'e'; ++t) {
    tables.push_back({"public", std::string(1, t), "100", "d", "date"});
    columns.push_back(indexedDate(std::string(1, t), "d"));
  }
  columns.push_back(indexedDate("a", "no_index", "false"));
  columns.push_back(indexedDate("untracked", "d"));  // not in the snapshot: never probed
  auto snap = analysis::TableStatsSnapshot::fromRows(tables, columns);
  auto all = snap->boundsProbes(0, 64);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].table, "a");
  EXPECT_EQ(all[0].column, "d");
  auto some = snap->boundsProbes(3, 3);
  ASSERT_EQ(some.size(), 3u);
  EXPECT_EQ(some[0].table, "d");
  EXPECT_EQ(some[2].table, "a");  // wraps around
}

TEST(IndexBounds, ProbedValuesReplaceAndTheRestCarryOver) {
  auto fresh = analysis::TableStatsSnapshot::fromRows(
      {{"public", "a", "100", "d", "date"}, {"public", "b", "100", "d", "date"}},
      {indexedDate("a", "d"), indexedDate("b", "d")});
  auto first = fresh->withIndexBounds({{"public", "a", "d", "2023-01-01", "2023-12-31"},
                                       {"public", "b", "d", "2024-01-01", "2024-12-31"}},
                                      nullptr);
  std::string lo, hi;
  ASSERT_TRUE(first->find("public", "a")->columns.at("d").bounds(&lo, &hi));
  EXPECT_EQ(hi, "2023-12-31");
  // The next refresh probes only b, and b's table is now empty: a keeps its bounds, b has none.
  auto next = fresh->withIndexBounds({}, first.get())->withIndexBounds({{"public", "b", "d", "", ""}}, nullptr);
  ASSERT_TRUE(next->find("public", "a")->columns.at("d").bounds(&lo, &hi));
  EXPECT_EQ(lo, "2023-01-01");
  EXPECT_FALSE(next->find("public", "b")->columns.at("d").bounds(&lo, &hi));
}

}  // namespace
}  // namespace pgwarden::guards
