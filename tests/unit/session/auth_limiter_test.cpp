// Failed-login limiter: per (address, credential) and per address, per minute, bounded.
#include "session/auth_limiter.h"

#include <gtest/gtest.h>

namespace pgwarden::daemon {
namespace {

using Block = session::AuthLimiter::Block;
constexpr session::AuthLimiter::Limits kLimits{3, 10};

TEST(AuthLimiter, BlocksACredentialAfterItsLimitWithinAMinute) {
  session::AuthLimiter l;
  const std::string bad = session::AuthLimiter::userCredential("alice");
  EXPECT_EQ(l.blocked("10.0.0.1", bad, 1000, kLimits), Block::kNone);
  EXPECT_EQ(l.recordFailure("10.0.0.1", bad, 1000), 1);
  EXPECT_EQ(l.recordFailure("10.0.0.1", bad, 2000), 2);
  EXPECT_EQ(l.blocked("10.0.0.1", bad, 2000, kLimits), Block::kNone);
  EXPECT_EQ(l.recordFailure("10.0.0.1", bad, 3000), 3);
  EXPECT_EQ(l.blocked("10.0.0.1", bad, 3000, kLimits), Block::kCredential);
  // The same credential from another address is not affected.
  EXPECT_EQ(l.blocked("10.0.0.2", bad, 3000, kLimits), Block::kNone);
  // The window ends a minute after the first failure.
  EXPECT_EQ(l.blocked("10.0.0.1", bad, 60999, kLimits), Block::kCredential);
  EXPECT_EQ(l.blocked("10.0.0.1", bad, 61000, kLimits), Block::kNone);
  EXPECT_EQ(l.recordFailure("10.0.0.1", bad, 61000), 1);
}

// One broken client retrying a wrong token from 127.0.0.1 is refused; every other credential
// from the same address still gets through.
TEST(AuthLimiter, AFailingCredentialDoesNotLockOutOthersFromItsAddress) {
  session::AuthLimiter l;
  const std::string wrong = session::AuthLimiter::tokenCredential("aaaa");
  for (int i = 0; i < 3; ++i) (void)l.recordFailure("127.0.0.1", wrong, 1000 + i);
  EXPECT_EQ(l.blocked("127.0.0.1", wrong, 2000, kLimits), Block::kCredential);
  EXPECT_EQ(l.blocked("127.0.0.1", session::AuthLimiter::tokenCredential("bbbb"), 2000, kLimits),
            Block::kNone);
  EXPECT_EQ(l.blocked("127.0.0.1", session::AuthLimiter::userCredential("alice"), 2000, kLimits),
            Block::kNone);
}

// A token hash and a user name never share a window, even when their text is the same.
TEST(AuthLimiter, UserAndTokenCredentialsAreApart) {
  EXPECT_NE(session::AuthLimiter::userCredential("x"), session::AuthLimiter::tokenCredential("x"));
}

// Guessing through many credentials from one address reaches the address's ceiling: then every
// credential from it is refused for the minute, and other addresses are not.
TEST(AuthLimiter, AnAddressTryingManyCredentialsHitsItsCeiling) {
  session::AuthLimiter l;
  for (int i = 0; i < 10; ++i) {
    const std::string c = session::AuthLimiter::userCredential("u" + std::to_string(i));
    EXPECT_EQ(l.blocked("10.0.0.1", c, 1000, kLimits), Block::kNone) << i;
    EXPECT_EQ(l.recordFailure("10.0.0.1", c, 1000), 1);
  }
  EXPECT_EQ(l.blocked("10.0.0.1", session::AuthLimiter::userCredential("fresh"), 1000, kLimits),
            Block::kAddress);
  EXPECT_EQ(l.blocked("10.0.0.2", session::AuthLimiter::userCredential("fresh"), 1000, kLimits),
            Block::kNone);
  EXPECT_EQ(l.blocked("10.0.0.1", session::AuthLimiter::userCredential("fresh"), 61000, kLimits),
            Block::kNone);
}

TEST(AuthLimiter, StaysBounded) {
  session::AuthLimiter l(100);
  for (int i = 0; i < 1000; ++i) {
    (void)l.recordFailure("10.0.0." + std::to_string(i), session::AuthLimiter::userCredential("u"),
                          5000 + i);
    (void)l.recordFailure("10.0.0.1", session::AuthLimiter::userCredential("u" + std::to_string(i)),
                          5000 + i);
  }
  EXPECT_LE(l.size(), 200u);
  l.expire(1000000);
  EXPECT_EQ(l.size(), 0u);
}

}  // namespace
}  // namespace pgwarden::daemon
