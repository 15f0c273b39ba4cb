// The client side of a session without a socket: deadlines, the idle trim, the pauses both ways
// (each reported once) and the stall clock, which runs only while the server is held back for the
// client and restarts whenever the client takes any of its bytes.
#include "session/client_link.h"

#include <gtest/gtest.h>
#include <uv.h>

namespace pgwarden::daemon {
namespace {

class ClientLinkTest : public ::testing::Test {
 protected:
  void SetUp() override { uv_loop_init(&loop_); }
  void TearDown() override { EXPECT_EQ(uv_loop_close(&loop_), 0); }
  uv_loop_t loop_{};
};

TEST_F(ClientLinkTest, TheStartupDeadlineOnlyMovesEarlier) {
  session::ClientLink link(&loop_, nullptr, true, {});
  link.opened(1000, 5000);
  EXPECT_EQ(link.connectedAtMs(), 1000u);
  EXPECT_EQ(link.deadlineMs(), 6000u);
  link.deadlineNoLaterThan(9000);
  EXPECT_EQ(link.deadlineMs(), 6000u);
  link.deadlineNoLaterThan(2000);
  EXPECT_EQ(link.deadlineMs(), 2000u);
  link.setDeadline(7000);  // closing: the last bytes' own deadline
  EXPECT_EQ(link.deadlineMs(), 7000u);
}

TEST_F(ClientLinkTest, AQuietLinkIsTrimmedOnceUntilBytesCome) {
  session::ClientLink link(&loop_, nullptr, true, {});
  link.opened(1000, 5000);
  EXPECT_FALSE(link.trimmed());
  EXPECT_EQ(link.idleMs(1400), 400u);
  link.received("Q", 1, 1500);
  EXPECT_EQ(link.inputBytes(), 1u);
  EXPECT_EQ(link.idleMs(1600), 100u);
  link.in().consume(1);
  link.trim();
  EXPECT_TRUE(link.trimmed());
  link.received("S", 1, 1700);
  EXPECT_FALSE(link.trimmed());
}

TEST_F(ClientLinkTest, EachPauseAndResumeOfTheServerIsReportedOnce) {
  session::ClientLink link(&loop_, nullptr, true, {});
  EXPECT_FALSE(link.resumeServer());
  EXPECT_TRUE(link.pauseServer());
  EXPECT_FALSE(link.pauseServer());
  EXPECT_TRUE(link.serverPaused());
  EXPECT_TRUE(link.resumeServer());
  EXPECT_FALSE(link.serverPaused());
  EXPECT_TRUE(link.pauseServer());
  link.serverGone();
  EXPECT_FALSE(link.serverPaused());
  EXPECT_FALSE(link.clientPaused());
  link.pauseClient();
  EXPECT_TRUE(link.clientPaused());
}

TEST_F(ClientLinkTest, TheStallClockRunsWhileTheClientTakesNothing) {
  session::ClientLink link(&loop_, nullptr, true, {});
  link->out().append(100, 'x');               // unsent bytes for the client
  EXPECT_EQ(link.stalledMs(1000, true), 0u);  // the server is not held back: no clock
  ASSERT_TRUE(link.pauseServer());
  EXPECT_EQ(link.stalledMs(1000, true), 0u);  // starts now
  EXPECT_EQ(link.stalledMs(1700, true), 700u);
  link->out().erase(0, 10);  // the client took some bytes: progress
  EXPECT_EQ(link.stalledMs(1800, true), 0u);
  EXPECT_EQ(link.stalledMs(2000, true), 200u);
  EXPECT_EQ(link.stalledMs(2100, false), 0u);  // no limit (or no server): the clock stops
  EXPECT_EQ(link.stalledMs(2200, true), 0u);   // and starts again from here
  EXPECT_EQ(link.stalledMs(2300, true), 100u);
  ASSERT_TRUE(link.resumeServer());
  EXPECT_EQ(link.stalledMs(5000, true), 0u);
  link->out().clear();
}

}  // namespace
}  // namespace pgwarden::daemon
