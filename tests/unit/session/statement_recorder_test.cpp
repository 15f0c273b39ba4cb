// session: the statement recorder. A run is recorded once however often it is finished; a denied
// text is one record per statement it holds, with the deny code; a finished run gives its budget
// back; the record carries the caller as the statement saw it.
#include <deque>
#include <vector>

#include "session/statement_recorder.h"
#include "tests/unit/session/session_test_util.h"

namespace pgwarden::daemon {
namespace {

// Keeps a copy of every record it is shown (the views hold only during the call).
class CollectingSink : public session::StatementSink {
 public:
  void onStatement(history::RecordView& record, const session::StatementPlan*) override {
    history::assignRecord(records.emplace_back(), record);
  }
  std::vector<history::Record> records;
};
using CopyingSink = CollectingSink;

guards::RequestContext who() {
  guards::RequestContext ctx;
  ctx.user = "agent";
  ctx.database = "analytics";
  ctx.group = "g";
  ctx.agent_id = "planner";
  ctx.conversation_id = "c-9";
  ctx.session_id = 3;
  return ctx;
}

TEST(StatementRecorder, ARunIsRecordedOnceWithItsCaller) {
  CollectingSink sink;
  session::StatementRecorder recorder(sink, nullptr, "host-1");
  session::PolicyEngine engine(16, 4096);
  auto run = session::startRun(engine.plan(nullptr, "SELECT 42", who(), nullptr), 0, false);
  run->rows_sent = 1;
  recorder.finish(*run, who(), nullptr, history::Outcome::kOk);
  recorder.finish(*run, who(), nullptr, history::Outcome::kError, "57014", "late");
  ASSERT_EQ(sink.records.size(), 1u);
  const auto& r = sink.records[0];
  EXPECT_EQ(r.outcome, history::Outcome::kOk);
  EXPECT_EQ(r.sql_text, "SELECT 42");
  EXPECT_EQ(r.instance_id, "host-1");
  EXPECT_EQ(r.user, "agent");
  EXPECT_EQ(r.agent_id, "planner");
  EXPECT_EQ(r.conversation_id, "c-9");
  EXPECT_EQ(r.session_id, 3u);
  EXPECT_EQ(r.rows_returned, 1);
  EXPECT_EQ(r.protocol, "simple");
}

TEST(StatementRecorder, TheRecordNamesTheHostTheRunWasSentTo) {
  CopyingSink sink;
  session::StatementRecorder recorder(sink, nullptr, "host-1");
  session::PolicyEngine engine(16, 4096);
  auto on_replica = session::startRun(engine.plan(nullptr, "SELECT 1", who(), nullptr), 0, false);
  on_replica->host = "10.0.0.2:5432";
  recorder.finish(*on_replica, who(), nullptr, history::Outcome::kOk);
  auto nowhere = session::startRun(engine.plan(nullptr, "SELECT 2", who(), nullptr), 0, false);
  recorder.finish(*nowhere, who(), nullptr, history::Outcome::kOk);
  ASSERT_EQ(sink.records.size(), 2u);
  EXPECT_EQ(sink.records[0].host, "10.0.0.2:5432");
  EXPECT_EQ(sink.records[1].host, "") << "a run that reached no server names none";
}

TEST(StatementRecorder, ARecordLeftWithTheRecorderCarriesNothingIntoTheNext) {
  CopyingSink sink;
  session::StatementRecorder recorder(sink, nullptr, "host-1");
  session::PolicyEngine engine(16, 4096);
  auto ctx = who();
  ctx.tool = "query";
  auto failed = session::startRun(
      engine.plan(nullptr, "SELECT * FROM public.orders_with_a_long_name", ctx, nullptr), 0, true);
  failed->rows_sent = 7;
  failed->truncated = true;
  recorder.finish(*failed, ctx, nullptr, history::Outcome::kError, "42P01", "relation does not exist");
  auto ok = session::startRun(nullptr, 0, false);
  recorder.finish(*ok, who(), nullptr, history::Outcome::kOk);
  ASSERT_EQ(sink.records.size(), 2u);
  EXPECT_EQ(sink.records[0].tables, (std::vector<std::string>{"public.orders_with_a_long_name"}));
  EXPECT_EQ(sink.records[0].sqlstate, "42P01");
  const auto& r = sink.records[1];
  EXPECT_EQ(r.outcome, history::Outcome::kOk);
  EXPECT_TRUE(r.tables.empty());
  EXPECT_TRUE(r.sql_text.empty());
  EXPECT_TRUE(r.fingerprint.empty());
  EXPECT_TRUE(r.sqlstate.empty());
  EXPECT_TRUE(r.error_message.empty());
  EXPECT_TRUE(r.tool_name.empty());
  EXPECT_EQ(r.guard_actions, "[]");
  EXPECT_EQ(r.rows_returned, 0);
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(r.protocol, "simple");
}

TEST(StatementRecorder, ADeniedTextIsOneRecordPerStatementAndCountsAsDenied) {
  const auto groups = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: read_only\n    - kind: budget\n      max_denied: 10\n");
  const guards::PolicyGroup* group = groups.at("g").get();
  budgets::BudgetLedger ledger;
  CollectingSink sink;
  session::StatementRecorder recorder(sink, &ledger, "host-1");
  session::PolicyEngine engine(16, 4096);
  auto ctx = who();
  ctx.budgets = &ledger;
  const auto plan = engine.plan(group, "DELETE FROM t; DELETE FROM u", ctx, nullptr);
  ASSERT_TRUE(plan->decision.denied);
  recorder.denied(*plan, ctx, group, {});
  ASSERT_EQ(sink.records.size(), 2u);
  for (const auto& r : sink.records) {
    EXPECT_EQ(r.outcome, history::Outcome::kDenied);
    EXPECT_EQ(r.deny_code, plan->decision.deny.code);
    EXPECT_FALSE(r.deny_code.empty());
  }
  EXPECT_EQ(sink.records[0].sql_text, "DELETE FROM t");
  EXPECT_EQ(sink.records[1].sql_text, "DELETE FROM u");
  EXPECT_EQ(ledger.counters(ledger.keyFor(ctx)).denied, 2);
}

TEST(StatementRecorder, AFinishedRunGivesItsBudgetBack) {
  const auto groups = test::groupsFromYaml(
      "g:\n  guards:\n    - kind: budget\n      max_rows: 100\n      per_user_concurrent: 1\n");
  const guards::PolicyGroup* group = groups.at("g").get();
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*group);
  ASSERT_NE(bg, nullptr);
  budgets::BudgetLedger ledger;
  CollectingSink sink;
  session::StatementRecorder recorder(sink, &ledger, "host-1");
  session::PolicyEngine engine(16, 4096);
  auto ctx = who();
  const auto key = std::make_shared<const budgets::BudgetKey>(ledger.keyFor(ctx));
  ASSERT_EQ(ledger.admit(*bg, *key).kind, budgets::BudgetLedger::Admission::Kind::kAdmitted);
  EXPECT_EQ(ledger.users()[0].running, 1);
  auto run = session::startRun(engine.plan(group, "SELECT 1", ctx, nullptr), 0, true);
  run->budget_key = key;
  run->rows_sent = 7;
  recorder.finish(*run, ctx, group, history::Outcome::kOk);
  EXPECT_EQ(ledger.users()[0].running, 0);
  EXPECT_EQ(ledger.counters(*key).rows, 7);
  EXPECT_EQ(sink.records.at(0).protocol, "extended");
}

}  // namespace
}  // namespace pgwarden::daemon

namespace pgwarden::daemon {
namespace {

// The queue's entries count themselves in the run: a pipeline's "is this run still awaited?" is
// one comparison, and copies, moves, resets and destruction keep the count exact.
TEST(QueuedRunTest, CountsTheQueueEntriesHoldingARun) {
  auto run = std::make_shared<session::StatementRun>();
  {
    std::deque<session::QueuedRun> queue;
    queue.emplace_back(run);
    queue.emplace_back(run);
    EXPECT_EQ(run->queued, 2u);
    session::QueuedRun copy = queue.front();
    EXPECT_EQ(run->queued, 3u);
    session::QueuedRun moved = std::move(copy);
    EXPECT_EQ(run->queued, 3u);
    moved.reset();
    EXPECT_EQ(run->queued, 2u);
    queue.pop_front();
    EXPECT_EQ(run->queued, 1u);
    queue.front() =
        session::QueuedRun(std::make_shared<session::StatementRun>());  // replaced by another run
    EXPECT_EQ(run->queued, 0u);
    queue.front() = run;
    EXPECT_EQ(run->queued, 1u);
  }
  EXPECT_EQ(run->queued, 0u);
  EXPECT_EQ(run.use_count(), 1);
}

}  // namespace
}  // namespace pgwarden::daemon
