// The paused-message object: one answer to "is the session paused?", moves checked against the
// pause table, and what a pause keeps (the message, the verdict, the EXPLAIN, the pool) kept only
// as long as the pause that needs it.
#include "session/paused_message.h"

#include <gtest/gtest.h>

#include <array>

namespace pgwarden::daemon {
namespace {

constexpr std::array kAll = {PauseReason::kNone,          PauseReason::kVerdict,
                             PauseReason::kVerdictServer, PauseReason::kServer,
                             PauseReason::kWriteStep,     PauseReason::kTxnState,
                             PauseReason::kConsoleGather, PauseReason::kConsoleHold};

// An address to compare with: the object only remembers which pool it waits on, never calls it.
Pool& fakePool() {
  alignas(64) static char storage[64];
  return *reinterpret_cast<Pool*>(storage);
}

TEST(PausedMessage, EveryPauseMayEndAndNoneStartsFromAnotherExceptTheServerWaitOfAVerdict) {
  for (PauseReason from : kAll) {
    EXPECT_TRUE(legalPause(from, PauseReason::kNone)) << pauseReasonName(from);
    for (PauseReason to : kAll) {
      if (to == PauseReason::kNone || to == from) continue;
      const bool expected = (from == PauseReason::kNone && to != PauseReason::kVerdictServer) ||
                            (from == PauseReason::kVerdict && to == PauseReason::kVerdictServer) ||
                            (from == PauseReason::kVerdictServer &&
                             (to == PauseReason::kVerdict || to == PauseReason::kServer));
      EXPECT_EQ(legalPause(from, to), expected)
          << pauseReasonName(from) << " -> " << pauseReasonName(to);
    }
  }
}

TEST(PausedMessage, AnImpossibleMoveIsRefusedAndChangesNothing) {
  PausedMessage p(7);
  ASSERT_TRUE(p.move(PauseReason::kWriteStep));
  EXPECT_FALSE(p.move(PauseReason::kConsoleHold));  // a console hold never starts mid-write
  EXPECT_EQ(p.reason(), PauseReason::kWriteStep);
  EXPECT_FALSE(p.keep("Q\0\0\0\x09SELECT 1"));  // nor is a message kept for a verdict then
  EXPECT_FALSE(p.holdsMessage());
  EXPECT_TRUE(p.move(PauseReason::kWriteStep));  // staying is not a move
  PausedMessage q(8);
  EXPECT_FALSE(q.move(PauseReason::kVerdictServer));  // no verdict without its message
  EXPECT_FALSE(q.paused());
}

TEST(PausedMessage, AMessageWaitsForItsVerdictThenForAServerAndGoesOnWithIt) {
  PausedMessage p(1);
  const std::string raw("Q\0\0\0\x0dSELECT 1\0", 14);
  ASSERT_TRUE(p.keep(raw));
  EXPECT_TRUE(p.paused());
  EXPECT_TRUE(p.holdsMessage());
  EXPECT_EQ(p.message(), raw);
  Pool& pool = fakePool();
  ASSERT_TRUE(p.waitForServer(pool));
  EXPECT_EQ(p.reason(), PauseReason::kVerdictServer);
  EXPECT_EQ(p.pool(), &pool);
  GateVerdict v;
  v.explain_error = "marker";
  p.holdVerdict(std::move(v));
  p.serverWaitOver();  // the connection came
  EXPECT_EQ(p.reason(), PauseReason::kVerdict);
  EXPECT_EQ(p.pool(), nullptr);
  const std::optional<GateVerdict> held = p.takeVerdict();
  ASSERT_TRUE(held);
  EXPECT_EQ(held->explain_error, "marker");
  EXPECT_EQ(p.takeMessage(), raw);
  EXPECT_FALSE(p.paused());
  EXPECT_TRUE(p.message().empty());
}

TEST(PausedMessage, DroppingTheMessageKeepsTheServerWaitAndHandsBackTheVerdict) {
  PausedMessage p(1);
  ASSERT_TRUE(p.keep("B"));
  Pool& pool = fakePool();
  ASSERT_TRUE(p.waitForServer(pool));
  p.holdVerdict(GateVerdict{});
  p.deferExplain({"EXPLAIN SELECT 1", false, {}});
  EXPECT_TRUE(p.dropMessage().has_value());
  EXPECT_EQ(p.reason(), PauseReason::kServer);  // the pool still owes an answer
  EXPECT_EQ(p.pool(), &pool);
  EXPECT_FALSE(p.holdsMessage());
  EXPECT_FALSE(p.takeExplain().has_value());
  p.serverWaitOver();
  EXPECT_FALSE(p.paused());
}

TEST(PausedMessage, AWriteStepOrStateWaitEndsWithOneResumeAndLeavesOtherPausesAlone) {
  PausedMessage p(1);
  ASSERT_TRUE(p.move(PauseReason::kWriteStep));
  p.endWriteStep();
  EXPECT_FALSE(p.paused());
  ASSERT_TRUE(p.move(PauseReason::kWriteStep));  // held again for the release
  EXPECT_FALSE(p.takeResume()) << "a new hold cancels the resume";
  p.endWriteStep();
  EXPECT_TRUE(p.takeResume());
  EXPECT_FALSE(p.takeResume());

  ASSERT_TRUE(p.move(PauseReason::kTxnState));
  EXPECT_FALSE(p.flushSent());
  p.setFlushSent();
  p.endWriteStep();  // a write step's end does not end a state wait
  EXPECT_EQ(p.reason(), PauseReason::kTxnState);
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
