// Session housekeeping through the chain: drivers' own SET/SHOW/BEGIN/ROLLBACK/DISCARD/... and
// empty texts go neither to a policy service nor to a Lua script (so neither a failing service nor
// a failing script refuses them), while the built-in guards after them still refuse protected
// settings; and budgets use the very same classification.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent_test_util.h"
#include "budgets/budget.h"
#include "guards/webhook_guard.h"

namespace pgwarden::guards {
namespace {

using agent_test::groups;
using Status = WebhookOutcome::Status;

// What pgjdbc, psycopg2 and libpq-based tools send on their own, at connect time or around a
// transaction, plus empty texts.
const std::vector<std::string> kHousekeeping = {
    "SET extra_float_digits = 3",
    "SET application_name = 'PostgreSQL JDBC Driver'",
    "SET DateStyle TO 'ISO'",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "BEGIN",
    "BEGIN ISOLATION LEVEL READ COMMITTED",
    "START TRANSACTION READ ONLY",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT s1",
    "RELEASE SAVEPOINT s1",
    "ROLLBACK TO SAVEPOINT s1",
    "SHOW TimeZone",
    "SHOW transaction_isolation",
    "RESET application_name",
    "DISCARD ALL",
    "DEALLOCATE ALL",
    "DEALLOCATE p1",
    "CLOSE c1",
    "",
    ";",
    "  ;  ; ",
    "BEGIN; SET LOCAL work_mem = '64MB'; COMMIT",
};

// Texts that are, or contain, something a policy must see.
const std::vector<std::string> kJudged = {
    "SELECT 1",
    "BEGIN; SELECT 1",
    "SET work_mem = '64MB'; SELECT 1",
    "SELECT set_config('statement_timeout', '0', false)",
    "SELECT current_setting('application_name')",
    "EXPLAIN SELECT 1",
    "VALUES (1)",
    "FETCH 10 FROM c1",
    "DECLARE c1 CURSOR FOR SELECT 1",
    "PREPARE p1 AS SELECT 1",
    "EXECUTE p1",
    "LISTEN chan",
};

using agent_test::Prepared;
using agent_test::prepare;

const std::string kWebhook = "    - kind: http_webhook\n      url: \"http://127.0.0.1:9/check\"\n";

// A Lua script that refuses everything it is shown.
const std::string kLuaDenyAll =
    "    - kind: lua\n      script: |\n        function check(ctx)\n"
    "          return {action = \"deny\", code = \"SEEN\", reason = ctx.sql}\n        end\n";
// A Lua script that always fails (fail_behavior: deny by default).
const std::string kLuaBroken =
    "    - kind: lua\n      script: |\n        function check(ctx) error(\"broken\") end\n";

WebhookOutcome refused() { return WebhookOutcome{Status::kTransport, 0, "", "Connection refused", 2}; }

class Calls final : public GuardObserver {
 public:
  void guardEvaluated(std::string_view, std::chrono::nanoseconds) override {}
  void externalCall(External, CallResult, std::chrono::nanoseconds) override { ++calls; }
  int calls = 0;
};

TEST(SessionHousekeeping, OneClassificationForBudgetsAndExternalGuards) {
  for (const auto& sql : kHousekeeping) {
    const auto a = analyzeUncached(sql);
    ASSERT_TRUE(a->ok) << sql << ": " << a->error;
    EXPECT_TRUE(isSessionHousekeeping(*a)) << sql;
    EXPECT_FALSE(countsAgainstBudget(*a)) << sql;
    EXPECT_EQ(budgetStatements(*a), 0) << sql;
  }
  for (const auto& sql : kJudged) {
    const auto a = analyzeUncached(sql);
    ASSERT_TRUE(a->ok) << sql << ": " << a->error;
    EXPECT_FALSE(isSessionHousekeeping(*a)) << sql;
    EXPECT_TRUE(countsAgainstBudget(*a)) << sql;
    EXPECT_GE(budgetStatements(*a), 1) << sql;
  }
  EXPECT_EQ(budgetStatements(*analyzeUncached("BEGIN; SELECT 1; SELECT 2; COMMIT")), 2);
}

TEST(SessionHousekeeping, NotSentToThePolicyServiceSoItsFailureCannotRefuseIt) {
  const auto m = groups("g:\n  guards:\n" + kWebhook);
  const PolicyGroup& g = *m.at("g");
  for (const auto& sql : kHousekeeping) {
    Prepared r = prepare(sql);
    const Decision d = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
    EXPECT_FALSE(d.webhook) << sql << ": no call for a driver's own housekeeping";
    EXPECT_FALSE(d.denied) << sql;
    EXPECT_TRUE(d.actions.empty()) << sql;
  }
  // Everything else still waits for the service, and its failure refuses it (fail closed).
  for (const auto& sql : kJudged) {
    Prepared r = prepare(sql);
    const Decision paused = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
    ASSERT_TRUE(paused.webhook) << sql;
    const Decision d = g.resumeWebhook(paused, refused(), *r.analysis, r.sql, r.ctx, nullptr);
    ASSERT_TRUE(d.denied) << sql;
    EXPECT_EQ(d.deny.code, webhook_codes::kPolicyUnavailable) << sql;
  }
}

TEST(SessionHousekeeping, NotShownToLuaScriptsSoAFailingScriptCannotRefuseIt) {
  for (const std::string& script : {kLuaDenyAll, kLuaBroken}) {
    const auto m = groups("g:\n  guards:\n" + script);
    const PolicyGroup& g = *m.at("g");
    Calls calls;
    for (const auto& sql : kHousekeeping) {
      Prepared r = prepare(sql);
      r.ctx.observer = &calls;
      const Decision d = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
      EXPECT_FALSE(d.denied) << sql << ": " << d.deny.code;
      EXPECT_TRUE(d.actions.empty()) << sql;
    }
    EXPECT_EQ(calls.calls, 0) << "the script never ran";
    for (const auto& sql : kJudged) {
      Prepared r = prepare(sql);
      r.ctx.observer = &calls;
      const Decision d = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
      ASSERT_TRUE(d.denied) << sql;
      EXPECT_EQ(d.deny.code, script == kLuaDenyAll ? "SEEN" : "SCRIPT_FAILED") << sql;
    }
    EXPECT_EQ(calls.calls, static_cast<int>(kJudged.size()));
  }
}

TEST(SessionHousekeeping, BuiltInGuardsAfterTheExternalOnesStillRefuseProtectedSettings) {
  // The external guards come first on purpose: skipping them must not skip the rest of the chain.
  const auto m = groups("g:\n  guards:\n" + kWebhook + kLuaBroken + "    - kind: read_only\n");
  const PolicyGroup& g = *m.at("g");
  struct Case {
    const char* sql;
    const char* code;
  };
  for (const Case& c : {Case{"SET default_transaction_read_only = off", "PROTECTED_SETTING"},
                        Case{"SET statement_timeout = 0", "PROTECTED_SETTING"},
                        Case{"SET SESSION statement_timeout TO 0", "PROTECTED_SETTING"},
                        Case{"RESET statement_timeout", "PROTECTED_SETTING"},
                        Case{"RESET ALL", "PROTECTED_SETTING"},
                        Case{"SET ROLE postgres", "PROTECTED_SETTING"},
                        Case{"SET SESSION AUTHORIZATION postgres", "PROTECTED_SETTING"},
                        Case{"BEGIN READ WRITE", "READ_ONLY"},
                        Case{"SET TRANSACTION READ WRITE", "READ_ONLY"},
                        Case{"SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "READ_ONLY"},
                        Case{"PREPARE TRANSACTION 'x'", "READ_ONLY"},
                        Case{"DISCARD ALL", "READ_ONLY"}}) {
    Prepared r = prepare(c.sql);
    const Decision d = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
    EXPECT_FALSE(d.webhook) << c.sql;
    ASSERT_TRUE(d.denied) << c.sql;
    EXPECT_EQ(d.deny.guard, "read_only") << c.sql;
    EXPECT_EQ(d.deny.code, c.code) << c.sql;
  }
  // A driver's ordinary set-up passes the whole chain without a call.
  for (const char* sql : {"SET extra_float_digits = 3", "SET application_name = 'PostgreSQL JDBC Driver'", "BEGIN",
                          "ROLLBACK", "SHOW TimeZone", ""}) {
    Prepared r = prepare(sql);
    const Decision d = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
    EXPECT_FALSE(d.webhook) << sql;
    EXPECT_FALSE(d.denied) << sql << ": " << d.deny.code;
  }
  // A real query still meets the service first.
  Prepared q = prepare("SELECT 1");
  const Decision p = g.evaluate(*q.analysis, q.sql, q.ctx, nullptr);
  ASSERT_TRUE(p.webhook);
  EXPECT_EQ(p.webhook->guard, 0u);
}

}  // namespace
}  // namespace pgwarden::guards
