// FANOUT_JOIN: a count over a many-to-many join.
#include <gtest/gtest.h>

#include "screening.h"

namespace pgwarden::screens {
namespace {

using screentest::codesOf;
using screentest::empty;
using screentest::rows;
using screentest::Screening;

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

}  // namespace
}  // namespace pgwarden::screens
