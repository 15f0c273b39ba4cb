// session: what both doors share after the verdict: the one statistics wait and the records of
// the statements of a text that never ran.
#include "session/statement_execution.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pgwarden::daemon {
namespace {

TEST(StatsWait, EndsOnceWhenLoadedOrAtItsDeadline) {
  StatsWait w;
  EXPECT_FALSE(w.waiting());
  EXPECT_FALSE(w.over(0, true));  // never begun: nothing to end
  w.begin(1000);
  EXPECT_TRUE(w.waiting());
  EXPECT_FALSE(w.over(1000 + kStatsWaitMs - 1, false));
  EXPECT_TRUE(w.over(1000 + kStatsWaitMs, false));
  EXPECT_FALSE(w.waiting());
  EXPECT_FALSE(w.over(1000 + kStatsWaitMs + 1, false));  // once
  w.begin(0);
  EXPECT_TRUE(w.over(1, true));  // the statistics came in first
}

TEST(FinishNotExecuted, RecordsEachStatementAfterTheFailedOneOnce) {
  auto plan = std::make_shared<StatementPlan>();
  plan->statements.resize(3);
  std::shared_ptr<const StatementPlan> shared = plan;
  size_t next = 1;
  guards::AgentOverrides ov;
  ov.conversation_id = "c-1";
  std::vector<size_t> recorded;
  finishNotExecuted(shared, next, ov, [&](StatementRun& run) {
    EXPECT_EQ(run.overrides.conversation_id, "c-1");
    recorded.push_back(run.index);
  });
  EXPECT_EQ(recorded, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(next, 3u);
  finishNotExecuted(shared, next, ov, [&](StatementRun&) { ADD_FAILURE() << "recorded twice"; });
}

}  // namespace
}  // namespace pgwarden::daemon
