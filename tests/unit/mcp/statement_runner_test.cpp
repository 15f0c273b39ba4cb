// The runner's callback contract: `done` runs exactly once, on a later loop turn, never inside
// start() or cancel(), whatever step the call is at. The host is a fake with no pool: the cases
// here end before a server connection is asked for.
#include "mcp/statement_runner.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <cstdlib>
#include <vector>

#include "pool/pool.h"
#include "session/statement_policy.h"
#include "mcp_harness.h"

namespace pgwarden::mcp {
namespace {

// No user and no pool: every case here ends before a connection is asked for.
class NoPoolHost final : public test::InertMcpHost {
 public:
  using InertMcpHost::InertMcpHost;
  std::optional<McpIdentity> identify(const std::string&) override { return std::nullopt; }
  [[noreturn]] pool::Pool& pool(const std::string&, bool) override { std::abort(); }
  [[noreturn]] pool::Pool& writePool(const std::string&) override { std::abort(); }
};

class RunnerContract : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(uv_loop_init(&loop_), 0); }
  void TearDown() override {
    runner_.reset();
    // The runner's timers close on the loop.
    while (uv_run(&loop_, UV_RUN_NOWAIT) != 0) {
    }
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  void make(RunSpec spec) {
    spec.who.user = "agent";
    spec.who.database = spec.who.server_database = "app";
    runner_ = std::make_unique<StatementRunner>(host_, std::move(spec), [this](RunResult&& r) {
      ++answers_;
      result_ = std::move(r);
    });
  }
  // Turns the loop until the answer came (the cases here need one or two turns).
  void turnUntilAnswered() {
    for (int i = 0; i < 100 && answers_ == 0; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  }

  uv_loop_t loop_{};
  NoPoolHost host_{&loop_};
  std::unique_ptr<StatementRunner> runner_;
  int answers_ = 0;
  RunResult result_;
};

TEST_F(RunnerContract, ACallRefusedByItsArgumentsIsAnsweredOnTheNextTurnNotInsideStart) {
  RunSpec spec;
  spec.sql = "SELECT 1";
  guards::GuardResult refusal;
  refusal.action = guards::Action::kDeny;
  refusal.code = "INVALID_ARGUMENTS";
  refusal.message = "bad arguments";
  spec.refusal = refusal;
  make(std::move(spec));
  runner_->start();
  EXPECT_EQ(answers_, 0) << "answered inside start()";
  turnUntilAnswered();
  ASSERT_EQ(answers_, 1);
  EXPECT_EQ(result_.kind, RunResult::Kind::kDenied);
  ASSERT_EQ(host_.records.size(), 1u);  // the refusal is recorded once
}

TEST_F(RunnerContract, ACancelWhileWaitingForStatisticsIsAnsweredOnTheNextTurnNotInsideCancel) {
  host_.stats_loading = true;
  RunSpec spec;
  spec.sql = "SELECT 1";
  make(std::move(spec));
  runner_->start();
  EXPECT_EQ(answers_, 0);
  runner_->cancel();
  EXPECT_EQ(answers_, 0) << "answered inside cancel()";
  runner_->cancel();  // a second cancel is a no-op
  turnUntilAnswered();
  ASSERT_EQ(answers_, 1);
  EXPECT_TRUE(result_.cancelled);
  EXPECT_EQ(result_.sqlstate, "57014");
  // Turning on answers nothing more: exactly once.
  for (int i = 0; i < 5; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(answers_, 1);
}

}  // namespace
}  // namespace pgwarden::mcp
