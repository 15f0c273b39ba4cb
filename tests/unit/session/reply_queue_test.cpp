// The reply queue without a session: pgwarden's own answers wait for their turn behind what the
// server owes, the ReadyForQuery count and the open batch follow the entries, and a skip to Sync
// starts and ends through one pair of calls that remembers whether the transaction must fail.
#include "session/reply_queue.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol/messages.h"

namespace pgwarden::daemon {
namespace {

using Expect = session::ReplyQueue::Expect;
using Pending = session::ReplyQueue::Pending;
using SkipCause = session::ReplyQueue::SkipCause;

std::string rfq(char status) {
  std::string out;
  protocol::writeReadyForQuery(out, status);
  return out;
}

TEST(ReplyQueue, ALocalAnswerGoesOutAtOnceWhenTheServerOwesNothing) {
  session::ReplyQueue q;
  std::string out;
  EXPECT_FALSE(q.answerLocal("abc", true, 'T', out));
  EXPECT_EQ(out, "abc" + rfq('T'));
  EXPECT_TRUE(q.empty());
}

TEST(ReplyQueue, ALocalAnswerWaitsBehindTheServersAnswersAndGoesOutInOrder) {
  session::ReplyQueue q;
  std::string out;
  q.push(Pending(Expect::kParse));
  EXPECT_TRUE(q.answerLocal("first", false, 'I', out));
  EXPECT_TRUE(q.answerLocal("second", true, 'I', out));
  q.push(Pending(Expect::kSync));
  EXPECT_TRUE(out.empty());
  q.emitLocalHeads('I', out);  // the head is the server's: nothing goes yet
  EXPECT_TRUE(out.empty());
  q.popAndEmit('E', out);  // the ParseComplete came: both answers follow, with the status now
  EXPECT_EQ(out, "firstsecond" + rfq('E'));
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q.front().kind, Expect::kSync);
}

TEST(ReplyQueue, TheLastMessageAnsweredHereGoesOutOnlyInItsTurn) {
  session::ReplyQueue q;
  std::string out;
  q.push(Pending(Expect::kBind));
  q.answerLastHere("mine", 'I', out);  // alone in the queue: at once
  EXPECT_EQ(out, "mine");
  EXPECT_TRUE(q.empty());
  q.push(Pending(Expect::kParse));
  q.push(Pending(Expect::kBind));
  q.answerLastHere("later", 'I', out);
  EXPECT_EQ(out, "mine");
  q.popAndEmit('I', out);
  EXPECT_EQ(out, "minelater");
}

TEST(ReplyQueue, AnEntryInsertedBeforeTheLastIsAnsweredBeforeIt) {
  session::ReplyQueue q;
  q.push(Pending(Expect::kSync));
  q.push(Pending(Expect::kParse));
  q.insertBeforeLast(Pending(Expect::kInternalClose));
  ASSERT_EQ(q.size(), 3u);
  q.pop();
  EXPECT_EQ(q.front().kind, Expect::kInternalClose);
  q.pop();
  EXPECT_EQ(q.front().kind, Expect::kParse);
  q.pop();
  q.pop();  // popping an empty queue changes nothing
  EXPECT_TRUE(q.empty());
}

TEST(ReplyQueue, ReadyForQueryIsOwedForEachSyncQueryAndSimpleStep) {
  session::ReplyQueue q;
  q.push(Pending(Expect::kParse));
  q.push(Pending(Expect::kSync));
  q.push(Pending(Expect::kQuery));
  Pending simple_explain(Expect::kExplain);
  simple_explain.explain().simple = true;
  q.push(std::move(simple_explain));
  q.push(Pending(Expect::kExplain));  // extended: ends with Close, no ReadyForQuery
  Pending step(Expect::kInternal);
  step.internal().step_closes = 3;  // Parse/Bind/Execute/Close then Flush
  q.push(std::move(step));
  q.push(Pending(Expect::kInternal));
  EXPECT_EQ(q.rfqOwed(), 4);
  EXPECT_TRUE(q.running());
}

TEST(ReplyQueue, AQueryBehindAnUnsyncedBatchMayNeverBeAnswered) {
  session::ReplyQueue q;
  q.push(Pending(Expect::kParse));
  q.push(Pending(Expect::kSync));
  q.push(Pending(Expect::kQuery));
  EXPECT_FALSE(q.owedIsUncertain());
  q.push(Pending(Expect::kBind));
  q.push(Pending(Expect::kQuery));
  EXPECT_TRUE(q.owedIsUncertain());
  session::ReplyQueue skipping;
  skipping.skipToSync(SkipCause::kServerError, "42601", 4);
  skipping.push(Pending(Expect::kQuery));
  EXPECT_TRUE(skipping.owedIsUncertain());  // the server skips to a Sync it has not seen
}

TEST(ReplyQueue, TheServerWaitsForASyncAfterAnOpeningMessageOrWhileItSkips) {
  session::ReplyQueue q;
  EXPECT_FALSE(q.unsyncedTail());
  q.batchMessage(protocol::Batch::kOpens);
  EXPECT_TRUE(q.unsynced());
  EXPECT_TRUE(q.unsyncedTail());  // answered after a Flush, still waiting for Sync
  q.push(Pending(Expect::kExecute));
  std::string out;
  EXPECT_TRUE(q.answerLocal("x", false, 'I', out));  // a local answer at the tail: not the server's
  EXPECT_TRUE(q.unsyncedTail());
  q.push(Pending(Expect::kSync));
  q.batchMessage(protocol::Batch::kCloses);
  EXPECT_FALSE(q.unsynced());
  EXPECT_FALSE(q.unsyncedTail());
  q.batchMessage(protocol::Batch::kNone);
  EXPECT_FALSE(q.unsynced());
  q.skipToSync(SkipCause::kServerError, "22012", 4);
  EXPECT_TRUE(q.unsyncedTail());
  (void)q.endSkip();
  EXPECT_FALSE(q.unsyncedTail());
}

TEST(ReplyQueue, ADenialSkipsToSyncAndFailsTheTransactionThereOnce) {
  session::ReplyQueue q;
  EXPECT_FALSE(q.skipping());
  session::SkippedBatch& s = q.skipToSync(SkipCause::kDenied, "42501", 4, true);
  EXPECT_TRUE(q.skipping());
  EXPECT_TRUE(s.active());
  EXPECT_EQ(s.sqlstate(), "42501");
  EXPECT_EQ(s.message(), "not executed: an earlier statement in the same batch was denied");
  EXPECT_FALSE(q.unsyncedTail());  // pgwarden skips; the server was never told
  EXPECT_TRUE(q.endSkip());
  EXPECT_FALSE(q.skipping());
  EXPECT_FALSE(q.skipped().active());
  q.skipToSync(SkipCause::kRefused, "54000", 4);
  EXPECT_EQ(q.skipped().message(), "not executed: an earlier message in the same batch failed");
  EXPECT_FALSE(q.endSkip());  // the abort belonged to the earlier batch
}

TEST(ReplyQueue, ACommitInTheBatchIsForgottenAtTheClientsSync) {
  session::ReplyQueue q;
  EXPECT_FALSE(q.txnEndInBatch());
  q.txnEndSent();
  EXPECT_TRUE(q.txnEndInBatch());
  q.syncReceived();
  EXPECT_FALSE(q.txnEndInBatch());
}

TEST(ReplyQueue, BackpressureStartsPastTheEntryLimit) {
  session::ReplyQueue q;
  for (size_t i = 0; i < session::ReplyQueue::kMaxEntries; ++i) q.push(Pending(Expect::kSync));
  EXPECT_FALSE(q.full());
  q.push(Pending(Expect::kSync));
  EXPECT_TRUE(q.full());
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.rfqOwed(), 0);
}

}  // namespace
}  // namespace pgwarden::daemon
