// session: what both doors share after the verdict: the one statistics wait, the records of the
// statements of a text (each once, the rest of a failed one as not executed), the row cap's count.
#include "session/statement_execution.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pgwarden::daemon {
namespace {

TEST(StatsWait, EndsOnceWhenLoadedOrAtItsDeadline) {
  session::StatsWait w;
  EXPECT_FALSE(w.waiting());
  EXPECT_FALSE(w.over(0, true));  // never begun: nothing to end
  w.begin(1000);
  EXPECT_TRUE(w.waiting());
  EXPECT_FALSE(w.over(1000 + session::kStatsWaitMs - 1, false));
  EXPECT_TRUE(w.over(1000 + session::kStatsWaitMs, false));
  EXPECT_FALSE(w.waiting());
  EXPECT_FALSE(w.over(1000 + session::kStatsWaitMs + 1, false));  // once
  w.begin(0);
  EXPECT_TRUE(w.over(1, true));  // the statistics came in first
}

TEST(FinishNotExecuted, RecordsEachStatementAfterTheFailedOneOnce) {
  auto plan = std::make_shared<session::StatementPlan>();
  plan->statements.resize(3);
  std::shared_ptr<const session::StatementPlan> shared = plan;
  size_t next = 1;
  guards::AgentOverrides ov;
  ov.conversation_id = "c-1";
  std::vector<size_t> recorded;
  session::finishNotExecuted(shared, next, ov, [&](session::StatementRun& run) {
    EXPECT_EQ(run.overrides.conversation_id, "c-1");
    recorded.push_back(run.index);
  });
  EXPECT_EQ(recorded, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(next, 3u);
  session::finishNotExecuted(shared, next, ov,
                             [&](session::StatementRun&) { ADD_FAILURE() << "recorded twice"; });
}

// The records a door's RunSink receives: statement index, outcome, message.
struct Recorded {
  size_t index;
  history::Outcome outcome;
  std::string message;
};

class FakeSink final : public session::RunSink {
 public:
  void finishRun(session::StatementRun& run, history::Outcome outcome, std::string_view,
                 std::string_view message) override {
    run.finished = true;
    recorded.push_back({run.index, outcome, std::string(message)});
  }
  std::vector<Recorded> recorded;
};

std::shared_ptr<const session::StatementPlan> planOf(size_t statements) {
  auto plan = std::make_shared<session::StatementPlan>();
  plan->statements.resize(statements);
  return plan;
}

protocol::Frame dataRow(std::string& storage, std::string_view cell) {
  storage.clear();
  protocol::writeDataRow(storage, {std::optional<std::string_view>(cell)});
  return protocol::Frame{'D', storage, std::string_view(storage).substr(5)};
}

TEST(TextExecution, EachStatementEndsOnceAndAnErrorEndsTheRest) {
  FakeSink sink;
  session::TextExecution exec(sink);
  exec.begin(planOf(3), {}, nullptr, false, nullptr);
  ASSERT_NE(exec.run(), nullptr);
  EXPECT_EQ(exec.run()->index, 0u);
  EXPECT_FALSE(exec.atLast());
  exec.finish(history::Outcome::kOk);
  ASSERT_NE(exec.run(), nullptr);
  EXPECT_EQ(exec.run()->index, 1u);
  exec.error("22012", "division by zero", 0);
  EXPECT_EQ(exec.run(), nullptr);
  ASSERT_EQ(sink.recorded.size(), 3u);
  EXPECT_EQ(sink.recorded[1].outcome, history::Outcome::kError);
  EXPECT_EQ(sink.recorded[1].message, "division by zero");
  EXPECT_EQ(sink.recorded[2].index, 2u);
  EXPECT_EQ(sink.recorded[2].message, session::kNotExecutedInQuery);
  exec.finishRest(history::Outcome::kAborted, "57P01", "again");
  EXPECT_EQ(sink.recorded.size(), 3u);  // nothing twice
}

TEST(TextExecution, AJudgedTextRunsNothingAndADetachedRunIsTheDoors) {
  FakeSink sink;
  session::TextExecution exec(sink);
  exec.judged(planOf(2), {});
  EXPECT_EQ(exec.run(), nullptr);
  exec.finishRest(history::Outcome::kCancelled, "57014", "cancelled");
  EXPECT_TRUE(sink.recorded.empty());
  exec.begin(planOf(2), {}, nullptr, false, nullptr);
  auto held = exec.detach();
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->index, 0u);
  EXPECT_EQ(exec.run()->index, 1u);
  EXPECT_TRUE(exec.atLast());
  exec.finish(history::Outcome::kOk);
  ASSERT_EQ(sink.recorded.size(), 1u);  // the detached run waits for its door
  EXPECT_EQ(sink.recorded[0].index, 1u);
}

TEST(CountDataRow, HoldsBackPastTheCapAndSeesTheSingleZero) {
  auto run = session::startRun(planOf(1), 0, false);
  std::string buf;
  EXPECT_TRUE(session::countDataRow(*run, dataRow(buf, "0"), 2));
  EXPECT_TRUE(run->single_zero);
  EXPECT_TRUE(session::countDataRow(*run, dataRow(buf, "7"), 2));
  EXPECT_FALSE(session::countDataRow(*run, dataRow(buf, "8"), 2));
  EXPECT_EQ(run->rows_sent, 2);
  EXPECT_TRUE(run->truncated);
  session::noteCommandComplete(*run, "SELECT 3", 14);
  EXPECT_EQ(run->rows_affected, 0);
  session::noteCommandComplete(*run, "UPDATE 4", 14);
  EXPECT_EQ(run->rows_affected, 4);
}

}  // namespace
}  // namespace pgwarden::daemon
