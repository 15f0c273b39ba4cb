// Connections that have not logged in: per-address and total caps, the oldest one making room
// only once it has had time to log in, and addresses counted per IPv4 host or IPv6 /64.
#include "session/startup_limiter.h"

#include <gtest/gtest.h>

using namespace pgwarden::session;
using Verdict = StartupLimiter::Verdict;

namespace {

StartupLimiter::Limits limits(size_t total, size_t per_address) {
  StartupLimiter::Limits l;
  l.max_total = total;
  l.max_per_address = per_address;
  l.evictable_after_ms = 1000;
  return l;
}

}  // namespace

TEST(StartupLimiter, CapsEachAddressAndLeavingFreesItsPlace) {
  StartupLimiter s;
  const auto l = limits(64, 2);
  EXPECT_EQ(s.admit(1, "10.0.0.1", 0, l, false).verdict, Verdict::kAdmit);
  EXPECT_EQ(s.admit(2, "10.0.0.1", 0, l, false).verdict, Verdict::kAdmit);
  // However old the others are, an address over its cap displaces nobody.
  const auto d = s.admit(3, "10.0.0.1", 5000, l, false);
  EXPECT_EQ(d.verdict, Verdict::kAddressFull);
  EXPECT_EQ(d.evict, 0u);
  EXPECT_EQ(s.admit(4, "10.0.0.2", 5000, l, false).verdict, Verdict::kAdmit);
  EXPECT_EQ(s.countFor("10.0.0.1"), 2u);
  s.leave(1);
  s.leave(1);  // twice is harmless
  EXPECT_EQ(s.countFor("10.0.0.1"), 1u);
  EXPECT_EQ(s.admit(5, "10.0.0.1", 5000, l, false).verdict, Verdict::kAdmit);
  EXPECT_EQ(s.size(), 3u);
}

TEST(StartupLimiter, UnixSocketClientsHaveNoPerAddressCapButCountInTheTotal) {
  StartupLimiter s;
  const auto l = limits(3, 1);
  for (uint64_t id = 1; id <= 3; ++id) EXPECT_EQ(s.admit(id, "", 0, l, false).verdict, Verdict::kAdmit);
  EXPECT_EQ(s.admit(4, "", 10, l, false).verdict, Verdict::kStartupFull);
  EXPECT_EQ(s.admit(5, "10.0.0.1", 10, l, false).verdict, Verdict::kStartupFull);
}

TEST(StartupLimiter, WhenFullTheOldestMakesRoomOnceItHadTimeToLogIn) {
  StartupLimiter s;
  const auto l = limits(3, 0);
  EXPECT_EQ(s.admit(10, "10.0.0.1", 100, l, false).verdict, Verdict::kAdmit);
  EXPECT_EQ(s.admit(11, "10.0.0.2", 200, l, false).verdict, Verdict::kAdmit);
  EXPECT_EQ(s.admit(12, "10.0.0.3", 300, l, false).verdict, Verdict::kAdmit);
  // Everyone is younger than a second: the newcomer is refused, nobody is closed.
  auto d = s.admit(13, "10.0.0.4", 1000, l, false);
  EXPECT_EQ(d.verdict, Verdict::kStartupFull);
  EXPECT_EQ(d.evict, 0u);
  EXPECT_EQ(s.size(), 3u);
  // A second after the first arrived, it gives way to the newcomer.
  d = s.admit(14, "10.0.0.4", 1100, l, false);
  EXPECT_EQ(d.verdict, Verdict::kAdmit);
  EXPECT_EQ(d.evict, 10u);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.countFor("10.0.0.1"), 0u);
  EXPECT_EQ(s.countFor("10.0.0.4"), 1u);
  // Then the next oldest, in order of arrival.
  d = s.admit(15, "10.0.0.5", 1200, l, false);
  EXPECT_EQ(d.evict, 11u);
  // One that logged in is no longer a candidate.
  s.leave(12);
  d = s.admit(16, "10.0.0.6", 5000, l, false);
  EXPECT_EQ(d.verdict, Verdict::kAdmit);
  EXPECT_EQ(d.evict, 0u);
}

TEST(StartupLimiter, FullClientSlotsAlsoTakeTheOldestUnauthenticatedOne) {
  StartupLimiter s;
  const auto l = limits(64, 0);
  // Nobody is starting up: with the slots full there is no one to close.
  auto d = s.admit(1, "10.0.0.1", 0, l, true);
  EXPECT_EQ(d.verdict, Verdict::kClientsFull);
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.admit(2, "10.0.0.1", 0, l, false).verdict, Verdict::kAdmit);
  d = s.admit(3, "10.0.0.2", 500, l, true);
  EXPECT_EQ(d.verdict, Verdict::kClientsFull);
  d = s.admit(4, "10.0.0.2", 1000, l, true);
  EXPECT_EQ(d.verdict, Verdict::kAdmit);
  EXPECT_EQ(d.evict, 2u);
}

TEST(StartupLimiter, StaysWithinItsCapsUnderAFlood) {
  StartupLimiter s;
  const auto l = limits(64, 16);
  size_t admitted = 0;
  for (uint64_t id = 1; id <= 10000; ++id) {
    const std::string addr = "10.0." + std::to_string(id % 50) + ".1";
    const auto d = s.admit(id, addr, id * 10, l, false);
    if (d.verdict == Verdict::kAdmit) ++admitted;
    EXPECT_LE(s.size(), 64u);
    EXPECT_LE(s.countFor(addr), 16u);
  }
  EXPECT_GT(admitted, 64u);  // the old ones kept making room
}

TEST(StartupLimiter, AddressKeys) {
  EXPECT_EQ(StartupLimiter::addressKey("192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(StartupLimiter::addressKey("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  EXPECT_EQ(StartupLimiter::addressKey("2001:db8:1:2::9"), "2001:db8:1:2::/64");
  EXPECT_EQ(StartupLimiter::addressKey("::ffff:192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(StartupLimiter::addressKey("::1"), "::/64");
  EXPECT_EQ(StartupLimiter::addressKey("unix"), "unix");
}
