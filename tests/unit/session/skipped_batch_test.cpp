// SkippedBatch: which statement a skipped Execute would have run, and the one that already has
// its record.
#include "session/skipped_batch.h"

#include <gtest/gtest.h>

namespace pgwarden::daemon {
namespace {

std::shared_ptr<const session::StatementPlan> planOf(const std::string& sql) {
  auto p = std::make_shared<session::StatementPlan>();
  session::PlannedStatement st;
  st.sql = sql;
  p->statements.push_back(st);
  return p;
}

TEST(SkippedBatch, ExecuteResolvesThroughTheBatchesBindAndParse) {
  session::SkippedBatch b;
  b.begin("42501", "an earlier statement in the same batch was denied", 8);
  EXPECT_TRUE(b.active());
  EXPECT_EQ(b.message(), "not executed: an earlier statement in the same batch was denied");
  EXPECT_EQ(b.sqlstate(), "42501");
  const auto four = planOf("SELECT 4");
  b.statement("", {four, false});
  auto st = b.findStatement("");
  ASSERT_TRUE(st);
  b.portal("p", *st);
  const auto hit = b.execute("p");
  EXPECT_TRUE(hit.found);
  EXPECT_EQ(hit.target.plan, four);
  EXPECT_FALSE(hit.target.recorded);
  EXPECT_FALSE(b.execute("other").found);  // the session resolves what the batch did not bind
}

TEST(SkippedBatch, TheDeniedStatementIsNotRecordedTwice) {
  session::SkippedBatch b;
  b.begin("42501", "x", 8);
  b.statement("s", {planOf("DELETE FROM t"), true});
  b.portal("", *b.findStatement("s"));
  EXPECT_TRUE(b.execute("").target.recorded);
  // A later Parse of the same name is a new statement: it is recorded.
  b.statement("s", {planOf("SELECT 5"), false});
  b.portal("", *b.findStatement("s"));
  EXPECT_FALSE(b.execute("").target.recorded);
}

TEST(SkippedBatch, NamesAreBoundedAndForgottenAtTheEnd) {
  session::SkippedBatch b;
  b.begin("", "x", 2);
  for (int i = 0; i < 100; ++i) b.statement("s" + std::to_string(i), {planOf("SELECT 1"), false});
  EXPECT_EQ(b.size(), 2u);
  EXPECT_TRUE(b.findStatement("s0"));
  EXPECT_FALSE(b.findStatement("s99"));
  b.end();
  EXPECT_FALSE(b.active());
  EXPECT_EQ(b.size(), 0u);
  b.begin("", "x", 2);
  EXPECT_FALSE(b.findStatement("s0"));  // a new stretch starts empty
}

}  // namespace
}  // namespace pgwarden::daemon
