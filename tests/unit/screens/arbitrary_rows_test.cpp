// ARBITRARY_ROWS: a LIMIT without ORDER BY that filled up.
#include <gtest/gtest.h>

#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::empty;
using screentest::rows;
using screentest::Screening;

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

}  // namespace
}  // namespace pgwarden::screens
