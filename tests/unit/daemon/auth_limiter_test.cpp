// Failed-login limiter: per address, per minute, bounded.
#include "session/auth_limiter.h"

#include <gtest/gtest.h>

using namespace pgwarden::daemon;

TEST(AuthLimiter, BlocksAfterTheLimitWithinAMinute) {
  AuthLimiter l;
  EXPECT_FALSE(l.blocked("10.0.0.1", 1000, 3));
  EXPECT_EQ(l.recordFailure("10.0.0.1", 1000), 1);
  EXPECT_EQ(l.recordFailure("10.0.0.1", 2000), 2);
  EXPECT_FALSE(l.blocked("10.0.0.1", 2000, 3));
  EXPECT_EQ(l.recordFailure("10.0.0.1", 3000), 3);
  EXPECT_TRUE(l.blocked("10.0.0.1", 3000, 3));
  // Another address is not affected.
  EXPECT_FALSE(l.blocked("10.0.0.2", 3000, 3));
  // The window ends a minute after the first failure.
  EXPECT_TRUE(l.blocked("10.0.0.1", 60999, 3));
  EXPECT_FALSE(l.blocked("10.0.0.1", 61000, 3));
  EXPECT_EQ(l.recordFailure("10.0.0.1", 61000), 1);
}

TEST(AuthLimiter, StaysBounded) {
  AuthLimiter l(100);
  for (int i = 0; i < 1000; ++i) (void)l.recordFailure("10.0.0." + std::to_string(i), 5000 + i);
  EXPECT_LE(l.size(), 100u);
  l.expire(1000000);
  EXPECT_EQ(l.size(), 0u);
}
