// UNFILTERED: a read of the whole of a big table.
#include <gtest/gtest.h>

#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::empty;
using screentest::rows;
using screentest::Screening;

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

}  // namespace
}  // namespace pgwarden::screens
