// What a guarded write holds back: its Query until the savepoint answers, the server's refusal of
// that savepoint (given once, and forgotten by the next write), the counted write, and the BEGIN
// and command tag the transaction state machine reads.
#include "session/write_hold.h"

#include <gtest/gtest.h>

namespace pgwarden::daemon {
namespace {

TEST(WriteHold, TheQueryIsHeldUntilTakenOnce) {
  session::WriteHold h;
  h.holdQuery("Q...INSERT");
  EXPECT_EQ(h.takeQuery(), "Q...INSERT");
  EXPECT_EQ(h.takeQuery(), "");
}

TEST(WriteHold, ASavepointRefusalIsGivenOnceAndForgottenByTheNextWrite) {
  session::WriteHold h;
  h.holdQuery("first");
  EXPECT_FALSE(h.takeSavepointRefusal());
  h.savepointRefused("25P02", "current transaction is aborted");
  auto r = h.takeSavepointRefusal();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, "25P02");
  EXPECT_EQ(r->second, "current transaction is aborted");
  EXPECT_FALSE(h.takeSavepointRefusal());
  h.savepointRefused("25P02", "again");
  h.holdQuery("second");  // a new write starts clean
  EXPECT_FALSE(h.takeSavepointRefusal());
}

TEST(WriteHold, ACountedWriteIsHeldUntilTaken) {
  session::WriteHold h;
  EXPECT_EQ(h.counted(), nullptr);
  h.holdCounted(session::WriteHold::Counted{{}, 3, true, "C...UPDATE 3"});
  ASSERT_NE(h.counted(), nullptr);
  EXPECT_EQ(h.counted()->rows, 3);
  auto taken = h.takeCounted();
  ASSERT_TRUE(taken);
  EXPECT_TRUE(taken->last);
  EXPECT_EQ(h.counted(), nullptr);
}

TEST(WriteHold, ABeginIsUnansweredUntilTheNextReadyForQuery) {
  session::WriteHold h;
  EXPECT_FALSE(h.beginUnanswered());
  h.beginSent();
  EXPECT_TRUE(h.beginUnanswered());
  h.statementAnswered();
  EXPECT_FALSE(h.beginUnanswered());
  h.noteTag("COMMIT");
  EXPECT_EQ(h.lastTag(), "COMMIT");
}

}  // namespace
}  // namespace pgwarden::daemon
