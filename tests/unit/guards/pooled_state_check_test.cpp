// Transaction pooling's session-state check: what would outlive its transaction on a shared
// server connection is refused with SESSION_STATE and what to do instead; what ends with the
// transaction, or what pgwarden carries itself, passes.
#include "guards/pooled_state_check.h"

#include <gtest/gtest.h>

#include "guards/codes.h"

namespace pgwarden::guards {
namespace {

std::optional<GuardResult> check(const char* sql) {
  const auto a = analysis::analyzeUncached(sql);
  EXPECT_TRUE(a->ok) << sql << ": " << a->error;
  for (const auto& st : a->statements) {
    if (auto r = sessionStateUse(st)) return r;
  }
  return std::nullopt;
}

class Refused : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};
TEST_P(Refused, WithCodeAndNextStep) {
  const auto [sql, mentions] = GetParam();
  const auto r = check(sql);
  ASSERT_TRUE(r) << sql;
  EXPECT_EQ(r->action, Action::kDeny);
  EXPECT_EQ(r->code, codes::kSessionState);
  EXPECT_NE(r->message.find(mentions), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("transaction-pooled"), std::string::npos) << r->message;
  EXPECT_NE(r->facts.json(r->code).find("next_step"), std::string::npos);
}
INSTANTIATE_TEST_SUITE_P(
    SessionState, Refused,
    ::testing::Values(std::pair{"SET work_mem = '64MB'", "SET LOCAL work_mem"},
                      std::pair{"SET SESSION statement_timeout = 0", "SET LOCAL"},
                      std::pair{"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE", "BEGIN"},
                      std::pair{"PREPARE q AS SELECT 1", "prepared statements"},
                      std::pair{"EXECUTE q", "prepared statements"},
                      std::pair{"DEALLOCATE q", "prepared statements"},
                      std::pair{"LISTEN jobs", "session pool_mode"},
                      std::pair{"UNLISTEN *", "session pool_mode"},
                      std::pair{"DECLARE c CURSOR WITH HOLD FOR SELECT 1", "without WITH HOLD"},
                      std::pair{"CREATE TEMP TABLE t (a int)", "temporary"},
                      std::pair{"CREATE TEMPORARY TABLE t AS SELECT 1", "temporary"},
                      std::pair{"SELECT pg_advisory_lock(1)", "pg_advisory_xact_lock"},
                      std::pair{"SELECT pg_try_advisory_lock_shared(1, 2)", "pg_advisory_xact_lock"},
                      std::pair{"SELECT set_config('work_mem', '1MB', false)", "is_local"},
                      std::pair{"LOAD 'auto_explain'", "LOAD"}));

class Passes : public ::testing::TestWithParam<const char*> {};
TEST_P(Passes, NothingOutlivesTheTransaction) {
  const auto r = check(GetParam());
  EXPECT_FALSE(r) << GetParam() << ": " << (r ? r->message : "");
}
INSTANTIATE_TEST_SUITE_P(
    SessionState, Passes,
    ::testing::Values("SELECT 1", "SET LOCAL work_mem = '64MB'", "SET DateStyle = 'German'",
                      "SET datestyle TO ISO", "SET TIME ZONE 'UTC'", "SET extra_float_digits = 3",
                      "SET search_path = public", "RESET work_mem", "BEGIN", "COMMIT",
                      "DECLARE c CURSOR FOR SELECT 1", "SELECT pg_advisory_xact_lock(1)",
                      "SELECT set_config('work_mem', '1MB', true)",
                      "SELECT set_config('application_name', 'x', false)", "NOTIFY jobs",
                      "CREATE TABLE t (a int)", "SHOW work_mem"));

TEST(SessionStateTest, CarriedSettingsInParameterStatusSpelling) {
  EXPECT_EQ(carriedSetting("datestyle"), "DateStyle");
  EXPECT_EQ(carriedSetting("TIMEZONE"), "TimeZone");
  EXPECT_EQ(carriedSetting("search_path"), "search_path");
  EXPECT_EQ(carriedSetting("work_mem"), "");
}

TEST(SessionStateTest, SearchPathValueKeepsQuotedElements) {
  const auto a = analysis::analyzeUncached("SET search_path = \"My Schema\", public, \"$user\"");
  ASSERT_TRUE(a->ok);
  EXPECT_EQ(a->statements[0].setting_value, "\"My Schema\", public, \"$user\"");
  EXPECT_FALSE(a->statements[0].set_local);
  EXPECT_TRUE(analysis::analyzeUncached("SET LOCAL work_mem = 1")->statements[0].set_local);
  EXPECT_EQ(analysis::analyzeUncached("SET extra_float_digits = -10")->statements[0].setting_value,
            "-10");
  EXPECT_EQ(analysis::analyzeUncached("SET extra_float_digits TO 3")->statements[0].setting_value,
            "3");
}

}  // namespace
}  // namespace pgwarden::guards
