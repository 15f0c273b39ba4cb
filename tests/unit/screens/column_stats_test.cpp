// Column statistics as the catalog query returns them: array literals, CHECK IN-lists, the rule
// for "these are all the values", and the data bounds.
#include <gtest/gtest.h>

#include "analysis/column_stats.h"

namespace pgwarden::guards {
namespace {

std::vector<std::string> row(std::string mcv, std::string freqs, std::string n_distinct,
                             std::string histogram = "", std::string category = "S") {
  return {"public", "t", "c", "text", category, "", "", mcv, freqs, n_distinct, histogram, "true", "false"};
}

TEST(ArrayText, QuotedEscapedAndNull) {
  auto v = parseArrayText(R"({a,"b c","say \"hi\"",NULL,"NULL"})");
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, (std::vector<std::string>{"a", "b c", "say \"hi\"", "NULL"}));
  EXPECT_EQ(parseArrayText("{}")->size(), 0u);
  EXPECT_FALSE(parseArrayText("{\"open"));
  EXPECT_FALSE(parseArrayText("{{1,2},{3,4}}"));
  EXPECT_FALSE(parseArrayText("not an array"));
}

TEST(CheckInList, AsPgGetConstraintdefPrintsIt) {
  EXPECT_EQ(checkInList("CHECK ((status = ANY (ARRAY['DELAYED'::text, 'DELIVERED'::text, 'it''s'::text])))"),
            (std::vector<std::string>{"DELAYED", "DELIVERED", "it's"}));
  EXPECT_EQ(checkInList("CHECK (((status)::text = ANY ((ARRAY['A'::character varying, 'B'::character varying])::text[])))"),
            (std::vector<std::string>{"A", "B"}));
  EXPECT_TRUE(checkInList("CHECK ((weight > (0)::numeric))").empty());
  EXPECT_TRUE(checkInList("CHECK (((status = ANY (ARRAY['A'::text])) OR (id > 5)))").empty());
}

TEST(KnownValues, McvsCoveringEveryRowOfAFewValues) {
  auto c = parseColumnRow(row("{DELIVERED,DELAYED,RETURNED}", "{0.6,0.2,0.2}", "3"));
  ASSERT_TRUE(c);
  ASSERT_NE(c->stats.knownValues(), nullptr);
  EXPECT_EQ(c->stats.knownValues()->size(), 3u);
}

TEST(KnownValues, SilentWhenMcvsDoNotCoverOrValuesAreMany) {
  EXPECT_EQ(parseColumnRow(row("{a,b}", "{0.5,0.3}", "5"))->stats.knownValues(), nullptr);
  EXPECT_EQ(parseColumnRow(row("{a,b}", "{0.6,0.4}", "-0.5"))->stats.knownValues(), nullptr);
  EXPECT_EQ(parseColumnRow(row("", "", ""))->stats.knownValues(), nullptr);
}

TEST(KnownValues, EnumLabelsAndCheckListComeFirst) {
  auto r = row("{a}", "{1}", "1");
  r[5] = "{low,medium,high}";
  EXPECT_EQ(*parseColumnRow(r)->stats.knownValues(), (std::vector<std::string>{"low", "medium", "high"}));
  r[5] = "";
  r[6] = "CHECK ((c = ANY (ARRAY['x'::text, 'y'::text])))";
  EXPECT_EQ(*parseColumnRow(r)->stats.knownValues(), (std::vector<std::string>{"x", "y"}));
}

TEST(Bounds, DatesFromHistogramAndMcvs) {
  auto c = parseColumnRow(row("{2026-06-30}", "{0.01}", "-0.2", "{2023-01-01,2026-06-29}", "D"));
  std::string lo, hi;
  ASSERT_TRUE(c->stats.bounds(&lo, &hi));
  EXPECT_EQ(lo, "2023-01-01");
  EXPECT_EQ(hi, "2026-06-30");
  EXPECT_EQ(compareValues('D', "2026-07-01", "2026-06-30 23:59:59+00"), 1);
  EXPECT_FALSE(compareValues('D', "07/01/2026", "2026-06-30"));
  EXPECT_EQ(compareValues('N', "10", "9.5"), 1);
  EXPECT_FALSE(parseColumnRow(row("{a}", "{1}", "1", "", "S"))->stats.bounds(&lo, &hi));
}

TEST(ColumnRow, MalformedRowsAreSkipped) {
  EXPECT_FALSE(parseColumnRow({"public", "t"}));
  EXPECT_FALSE(parseColumnRow({"", "t", "c", "", "", "", "", "", "", "", "", "", ""}));
}

}  // namespace
}  // namespace pgwarden::guards
