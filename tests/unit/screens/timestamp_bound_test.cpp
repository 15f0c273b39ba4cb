// TIMESTAMP_DATE_BOUND: a timestamp column's range that ends at a bare date, with the corrected
// statement; silent on a date column, a time of day, a cast to date and an exclusive end.
#include <gtest/gtest.h>

#include "screening.h"

namespace pgwarden::screens {
namespace {

using analysis::TableStatsSnapshot;
using screentest::codesOf;
using screentest::empty;
using screentest::rows;
using screentest::Screening;

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
