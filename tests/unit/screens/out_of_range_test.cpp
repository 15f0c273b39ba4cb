// OUT_OF_RANGE: a range past the ends of the column's data, read from pg_stats or through the
// index when pg_stats has none; silent inside the data or without bounds.
#include <gtest/gtest.h>

#include "screening.h"

namespace pgwarden::screens {
namespace {

using analysis::TableStatsSnapshot;
using screentest::codesOf;
using screentest::empty;
using screentest::rows;
using screentest::Screening;
using screentest::shipmentStats;
using screentest::singleZero;

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

}  // namespace
}  // namespace pgwarden::screens
