#include "session/provenance.h"

#include <gtest/gtest.h>

#include "session/statement_policy.h"

namespace pgwarden::daemon {
namespace {

TEST(Provenance, SaysWhatRanAfterTheRewriteAndWhy) {
  auto plan = std::make_shared<session::StatementPlan>();
  plan->statements.push_back({"select", "", {}, "SELECT id FROM t", false, {}});
  plan->decision.rewritten_sql = "SELECT id FROM t\nLIMIT 1001";
  guards::Verdict capped;
  capped.code = "ROWS_CAPPED";
  plan->decision.actions.push_back(capped);
  session::StatementRun run;
  run.plan = plan;
  run.rows_sent = 40;
  guards::Verdict screen;
  screen.code = "UNKNOWN_VALUE";
  run.screens.push_back(screen);
  EXPECT_EQ(
      session::provenanceDetail(run, nullptr),
      R"({"code":"PROVENANCE","executed_sql":"SELECT id FROM t\nLIMIT 1001","rewritten":true,)"
      R"("verdicts":["ROWS_CAPPED"],"warnings":["UNKNOWN_VALUE"],"estimated_rows":null,)"
      R"("rows_returned":40,"truncated":false,"stats_age_seconds":null})");
  plan->decision.rewritten_sql.reset();
  EXPECT_NE(session::provenanceDetail(run, nullptr)
                .find(R"("executed_sql":"SELECT id FROM t","rewritten":false)"),
            std::string::npos);
}

TEST(Provenance, CarriesThePlannersEstimateAndTheStatisticsAge) {
  auto plan = std::make_shared<session::StatementPlan>();
  plan->statements.push_back({"select", "", {}, "SELECT id FROM t", false, {}});
  plan->decision.estimated_rows = 41.6;
  session::StatementRun run;
  run.plan = plan;
  run.rows_sent = 40;
  const auto stats = analysis::TableStatsSnapshot::fromRows({{"public", "t", "40", "", ""}});
  const std::string p = session::provenanceDetail(run, stats.get());
  EXPECT_NE(p.find(R"("estimated_rows":41,"rows_returned":40)"), std::string::npos) << p;
  EXPECT_NE(p.find(R"("stats_age_seconds":)"), std::string::npos) << p;
  EXPECT_EQ(p.find(R"("stats_age_seconds":null)"), std::string::npos) << p;
}

TEST(Provenance, OnlyTheWordsForOnTurnItOn) {
  EXPECT_TRUE(session::provenanceOn("on"));
  EXPECT_TRUE(session::provenanceOn("TRUE"));
  EXPECT_FALSE(session::provenanceOn("off"));
  EXPECT_FALSE(session::provenanceOn(""));
}

}  // namespace
}  // namespace pgwarden::daemon
