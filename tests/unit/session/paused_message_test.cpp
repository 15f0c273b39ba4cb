// The paused-message object: one answer to "is the session paused?", moves checked against the
// pause table, and what a pause keeps (the message, the verdict, the EXPLAIN, the pool) kept only
// as long as the pause that needs it.
#include "session/paused_message.h"

#include <gtest/gtest.h>

#include <array>

namespace pgwarden::daemon {
namespace {

constexpr std::array kAll = {
    session::PauseReason::kNone,          session::PauseReason::kVerdict,
    session::PauseReason::kVerdictServer, session::PauseReason::kServer,
    session::PauseReason::kWriteStep,     session::PauseReason::kTxnState,
    session::PauseReason::kConsoleGather, session::PauseReason::kConsoleHold};

// An address to compare with: the object only remembers which pool it waits on, never calls it.
pool::Pool& fakePool() {
  alignas(64) static char storage[64];
  return *reinterpret_cast<pool::Pool*>(storage);
}

TEST(PausedMessage, EveryPauseMayEndAndNoneStartsFromAnotherExceptTheServerWaitOfAVerdict) {
  for (session::PauseReason from : kAll) {
    EXPECT_TRUE(session::legalPause(from, session::PauseReason::kNone))
        << session::pauseReasonName(from);
    for (session::PauseReason to : kAll) {
      if (to == session::PauseReason::kNone || to == from) continue;
      const bool expected =
          (from == session::PauseReason::kNone && to != session::PauseReason::kVerdictServer) ||
          (from == session::PauseReason::kVerdict && to == session::PauseReason::kVerdictServer) ||
          (from == session::PauseReason::kVerdictServer &&
           (to == session::PauseReason::kVerdict || to == session::PauseReason::kServer));
      EXPECT_EQ(session::legalPause(from, to), expected)
          << session::pauseReasonName(from) << " -> " << session::pauseReasonName(to);
    }
  }
}

TEST(PausedMessage, AnImpossibleMoveIsRefusedAndChangesNothing) {
  session::PausedMessage p(7);
  ASSERT_TRUE(p.move(session::PauseReason::kWriteStep));
  EXPECT_FALSE(
      p.move(session::PauseReason::kConsoleHold));  // a console hold never starts mid-write
  EXPECT_EQ(p.reason(), session::PauseReason::kWriteStep);
  EXPECT_FALSE(p.keep("Q\0\0\0\x09SELECT 1"));  // nor is a message kept for a verdict then
  EXPECT_FALSE(p.holdsMessage());
  EXPECT_TRUE(p.move(session::PauseReason::kWriteStep));  // staying is not a move
  session::PausedMessage q(8);
  EXPECT_FALSE(q.move(session::PauseReason::kVerdictServer));  // no verdict without its message
  EXPECT_FALSE(q.paused());
}

TEST(PausedMessage, AMessageWaitsForItsVerdictThenForAServerAndGoesOnWithIt) {
  session::PausedMessage p(1);
  const std::string raw("Q\0\0\0\x0dSELECT 1\0", 14);
  ASSERT_TRUE(p.keep(raw));
  EXPECT_TRUE(p.paused());
  EXPECT_TRUE(p.holdsMessage());
  EXPECT_EQ(p.message(), raw);
  pool::Pool& pool = fakePool();
  ASSERT_TRUE(p.waitForServer(pool));
  EXPECT_EQ(p.reason(), session::PauseReason::kVerdictServer);
  EXPECT_EQ(p.pool(), &pool);
  session::GateVerdict v;
  v.explain_error = "marker";
  p.holdVerdict(std::move(v));
  p.serverWaitOver();  // the connection came
  EXPECT_EQ(p.reason(), session::PauseReason::kVerdict);
  EXPECT_EQ(p.pool(), nullptr);
  const std::optional<session::GateVerdict> held = p.takeVerdict();
  ASSERT_TRUE(held);
  EXPECT_EQ(held->explain_error, "marker");
  EXPECT_EQ(p.takeMessage(), raw);
  EXPECT_FALSE(p.paused());
  EXPECT_TRUE(p.message().empty());
}

TEST(PausedMessage, DroppingTheMessageKeepsTheServerWaitAndHandsBackTheVerdict) {
  session::PausedMessage p(1);
  ASSERT_TRUE(p.keep("B"));
  pool::Pool& pool = fakePool();
  ASSERT_TRUE(p.waitForServer(pool));
  p.holdVerdict(session::GateVerdict{});
  p.deferExplain({"EXPLAIN SELECT 1", false, {}});
  EXPECT_TRUE(p.dropMessage().has_value());
  EXPECT_EQ(p.reason(), session::PauseReason::kServer);  // the pool still owes an answer
  EXPECT_EQ(p.pool(), &pool);
  EXPECT_FALSE(p.holdsMessage());
  EXPECT_FALSE(p.takeExplain().has_value());
  p.serverWaitOver();
  EXPECT_FALSE(p.paused());
}

TEST(PausedMessage, AWriteStepOrStateWaitEndsWithOneResumeAndLeavesOtherPausesAlone) {
  session::PausedMessage p(1);
  ASSERT_TRUE(p.move(session::PauseReason::kWriteStep));
  p.endWriteStep();
  EXPECT_FALSE(p.paused());
  ASSERT_TRUE(p.move(session::PauseReason::kWriteStep));  // held again for the release
  EXPECT_FALSE(p.takeResume()) << "a new hold cancels the resume";
  p.endWriteStep();
  EXPECT_TRUE(p.takeResume());
  EXPECT_FALSE(p.takeResume());

  ASSERT_TRUE(p.move(session::PauseReason::kTxnState));
  EXPECT_FALSE(p.flushSent());
  p.setFlushSent();
  p.endWriteStep();  // a write step's end does not end a state wait
  EXPECT_EQ(p.reason(), session::PauseReason::kTxnState);
  EXPECT_TRUE(p.flushSent());
  p.endTxnStateWait();
  EXPECT_FALSE(p.paused());
  EXPECT_FALSE(p.flushSent());

  ASSERT_TRUE(p.keep("E"));
  p.endWriteStep();  // an extended write step failing while a later Execute waits for its verdict
  EXPECT_TRUE(p.holdsMessage());
  EXPECT_EQ(p.reset().has_value(), false);
  EXPECT_FALSE(p.paused());
  EXPECT_FALSE(p.takeResume());
}

}  // namespace
}  // namespace pgwarden::daemon
