// CONDITIONS_EXCLUDE: an empty read of one table whose conditions each match rows by the
// statistics but not together; silent wherever the estimate is not sound.
#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::empty;
using screentest::rows;
using screentest::Screening;
using screentest::singleZero;

std::shared_ptr<const analysis::TableStatsSnapshot> ordersStats() {
  auto col = [](std::string name, std::string type, std::string cat, std::string mcv,
                std::string freqs, std::string nd,
                std::string null_frac) -> std::vector<std::string> {
    return {"public", "orders", name,   type,    cat,     "",      "",        mcv, freqs,
            nd,       "",       "true", "false", "false", "false", null_frac, ""};
  };
  return analysis::TableStatsSnapshot::fromRows(
      {{"public", "orders", "3000", "id", "integer"}, {"public", "items", "9000", "id", "integer"}},
      {col("status", "text", "S", "{NEW,PAID,SHIPPED}", "{0.34,0.33,0.33}", "3", "0"),
       col("shipped_at", "timestamp without time zone", "D", "", "", "-0.3", "0.667"),
       col("note", "text", "S", "", "", "-1", "0.999"),
       col("amount", "integer", "N", "{100,200}", "{0.5,0.3}", "50", "0")});
}

TEST(ConditionsExclude, EachAloneMatchesRowsTogetherNone) {
  Screening r;
  r.stats = ordersStats();
  r.result = singleZero();
  auto vs = r.screen("SELECT count(*) FROM orders WHERE status = 'NEW' AND shipped_at IS NOT NULL");
  ASSERT_EQ(codesOf(vs), std::vector<std::string>{"CONDITIONS_EXCLUDE"});
  EXPECT_EQ(
      vs[0].message.rfind("Nothing matched, yet each condition alone matches rows of public.orders "
                          "(status = 'NEW': about 1020, shipped_at IS NOT NULL: about 999 of 3000",
                          0),
      0u)
      << vs[0].message;
  EXPECT_EQ(
      vs[0].hint,
      "SELECT count(*) FILTER (WHERE status = 'NEW') AS alone_1, count(*) FILTER (WHERE shipped_at "
      "IS NOT NULL) AS alone_2 FROM orders");
  EXPECT_NE(vs[0].detail.find("\"rows_alone\":[\"1020\",\"999\"]"), std::string::npos)
      << vs[0].detail;
  EXPECT_NE(vs[0].detail.find("\"expected_together\":340"), std::string::npos) << vs[0].detail;
  // IN lists and numbers from the MCVs, an empty result rather than a zero count.
  r.result = empty();
  EXPECT_EQ(
      codesOf(r.screen("SELECT id FROM orders WHERE status IN ('NEW', 'PAID') AND amount = 100")),
      std::vector<std::string>{"CONDITIONS_EXCLUDE"});
}

TEST(ConditionsExclude, SilentWhereTheEstimateSaysNothing) {
  Screening r;
  r.stats = ordersStats();
  r.result = singleZero();
  for (const char* sql :
       {"SELECT count(*) FROM orders WHERE status = 'NEW'",                        // one condition
        "SELECT count(*) FROM orders WHERE status = 'NEW' AND note IS NOT NULL",   // 3 rows alone
        "SELECT count(*) FROM orders WHERE status = 'NEW' AND amount > 150",       // a range
        "SELECT count(*) FROM orders WHERE status = 'NEW' AND lower(note) = 'x'",  // not understood
        "SELECT count(*) FROM orders WHERE status = 'NEW' OR shipped_at IS NOT NULL",  // OR
        "SELECT count(*) FROM orders WHERE status = 'NEW' AND amount = 300",           // not an MCV
        "SELECT count(*) FROM orders o JOIN items i ON i.id = o.id WHERE o.status = 'NEW' "
        "AND o.shipped_at IS NOT NULL",  // a join
        "SELECT status FROM orders WHERE status = 'NEW' AND shipped_at IS NOT NULL GROUP BY status "
        "HAVING count(*) > 5"}) {  // HAVING
    EXPECT_EQ(codesOf(r.screen(sql)), std::vector<std::string>{}) << sql;
  }
  // An unknown value says more: that one speaks alone.
  EXPECT_EQ(codesOf(r.screen(
                "SELECT count(*) FROM orders WHERE status = 'LOST' AND shipped_at IS NOT NULL")),
            std::vector<std::string>{"UNKNOWN_VALUE"});
  // Rows came back: nothing to explain.
  r.result = rows(4);
  EXPECT_TRUE(
      r.screen("SELECT id FROM orders WHERE status = 'NEW' AND shipped_at IS NOT NULL").empty());
}

}  // namespace
}  // namespace pgwarden::screens
