// One line per interval, and the count of the lines left out in between.
#include "common/log_throttle.h"

#include <gtest/gtest.h>

TEST(LogThrottle, OneLinePerIntervalCountingTheRest) {
  pgwarden::LogThrottle t(1000);
  uint64_t left_out = 99;
  ASSERT_TRUE(t.allow(0, left_out));
  EXPECT_EQ(left_out, 0u);
  for (uint64_t ms = 1; ms < 1000; ms += 10) EXPECT_FALSE(t.allow(ms, left_out));
  ASSERT_TRUE(t.allow(1000, left_out));
  EXPECT_EQ(left_out, 100u);
  ASSERT_TRUE(t.allow(5000, left_out));
  EXPECT_EQ(left_out, 0u);
}
