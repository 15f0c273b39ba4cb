// PARTIAL_RESULT: a result cut by the row cap, with a runnable hint that aggregates on the server.
#include <gtest/gtest.h>

#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::Screening;

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

}  // namespace
}  // namespace pgwarden::screens
