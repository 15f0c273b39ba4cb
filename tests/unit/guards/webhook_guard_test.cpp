// The http_webhook guard without the network: the chain pauses at the guard with the ctx document,
// resumeWebhook applies the answer and goes on (later guards, rewrites, a second pause), and every
// failure becomes fail_behavior with a reason that names nothing internal. Config and headers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent_test_util.h"
#include "housekeeping_texts.h"
#include "common/config_util.h"
#include "budgets/guard_kinds.h"
#include "guards/webhook_guard.h"

namespace pgwarden::guards {
namespace {

using agent_test::groups;
using Status = WebhookOutcome::Status;

WebhookOutcome ok(const std::string& body) { return WebhookOutcome{Status::kOk, 200, body, "", 1}; }

using agent_test::Prepared;
using agent_test::prepare;

const char* kUrl = "http://policy.internal.example:8181/v1/check?token=s3cret";

std::string webhookYaml(const std::string& extra = "") {
  return std::string("    - kind: http_webhook\n      url: \"") + kUrl + "\"\n" + extra;
}

TEST(WebhookChain, PausesWithTheCtxDocumentThenAllows) {
  const auto m = groups("g:\n  guards:\n" + webhookYaml() + "    - kind: row_limit\n      max_rows: 5\n");
  const PolicyGroup& g = *m.at("g");
  Prepared r = prepare("SELECT * FROM t WHERE a = 1");
  const Decision paused = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
  ASSERT_TRUE(paused.webhook);
  EXPECT_FALSE(paused.denied);
  EXPECT_EQ(paused.webhook->guard, 0u);
  EXPECT_FALSE(paused.rewritten_sql) << "later guards wait for the answer";
  EXPECT_EQ(paused.max_rows, -1);
  const auto body = nlohmann::json::parse(paused.webhook->body);
  EXPECT_EQ(body["sql"], r.sql);
  EXPECT_EQ(body["agent_id"], "planner");
  EXPECT_EQ(body["conversation_id"], "c-42");
  EXPECT_EQ(body["tables"][0], "t");

  const Decision done = g.resumeWebhook(paused, ok(R"({"action":"allow"})"), *r.analysis, r.sql, r.ctx, nullptr);
  EXPECT_FALSE(done.webhook);
  EXPECT_FALSE(done.denied);
  EXPECT_EQ(done.max_rows, 5) << "row_limit ran after the answer";
  EXPECT_TRUE(done.rewritten_sql);
}

TEST(WebhookChain, DenyAnswerStopsTheChain) {
  const auto m = groups("g:\n  guards:\n" + webhookYaml() + "    - kind: row_limit\n      max_rows: 5\n");
  const PolicyGroup& g = *m.at("g");
  Prepared r = prepare("SELECT * FROM t WHERE a = 1");
  const Decision paused = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
  const Decision d = g.resumeWebhook(
      paused,
      ok(R"({"action":"deny","code":"TICKET_REQUIRED","reason":"Ask for a ticket first.","detail":{"t":1},"hint":"SELECT 1"})"),
      *r.analysis, r.sql, r.ctx, nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.guard, "http_webhook");
  EXPECT_EQ(d.deny.code, "TICKET_REQUIRED");
  EXPECT_EQ(d.deny.message, "Ask for a ticket first.");
  EXPECT_EQ(d.deny.hint, "SELECT 1");
  EXPECT_NE(d.deny.detail.find("{\\\"t\\\":1}"), std::string::npos) << d.deny.detail;
  EXPECT_EQ(d.max_rows, -1);
}

TEST(WebhookChain, EarlierDenyMeansNoCall) {
  const auto m = groups("g:\n  guards:\n    - kind: read_only\n" + webhookYaml());
  Prepared r = prepare("DELETE FROM t");
  const Decision d = m.at("g")->evaluate(*r.analysis, r.sql, r.ctx, nullptr);
  EXPECT_TRUE(d.denied);
  EXPECT_FALSE(d.webhook);
}

TEST(WebhookChain, TwoWebhooksPauseTwiceAndWarningsAccumulate) {
  const auto m = groups("g:\n  guards:\n" + webhookYaml() + webhookYaml());
  const PolicyGroup& g = *m.at("g");
  Prepared r = prepare("SELECT 1");
  const Decision p1 = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
  ASSERT_TRUE(p1.webhook);
  EXPECT_EQ(p1.webhook->guard, 0u);
  const Decision p2 = g.resumeWebhook(p1, ok(R"({"action":"warn","reason":"first says careful"})"), *r.analysis,
                                      r.sql, r.ctx, nullptr);
  ASSERT_TRUE(p2.webhook);
  EXPECT_EQ(p2.webhook->guard, 1u);
  const Decision d = g.resumeWebhook(p2, ok(R"({"action":"warn","code":"SECOND","reason":"second too"})"),
                                     *r.analysis, r.sql, r.ctx, nullptr);
  EXPECT_FALSE(d.webhook);
  EXPECT_FALSE(d.denied);
  ASSERT_EQ(d.warnings.size(), 2u);
  EXPECT_EQ(d.warnings[0].code, "POLICY_WARNING");
  EXPECT_EQ(d.warnings[1].code, "SECOND");
  EXPECT_EQ(d.actions.size(), 2u);
}

TEST(WebhookChain, ThenCostGateStillAsksForThePlan) {
  const auto m = groups("g:\n  guards:\n" + webhookYaml() + "    - kind: cost_gate\n      tables: [public.t]\n");
  const PolicyGroup& g = *m.at("g");
  Prepared r = prepare("SELECT * FROM t WHERE a = 1");
  const Decision p = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
  ASSERT_TRUE(p.webhook);
  EXPECT_FALSE(p.explain_sql);
  const Decision d = g.resumeWebhook(p, ok(R"({"action":"allow"})"), *r.analysis, r.sql, r.ctx, nullptr);
  EXPECT_FALSE(d.denied);
  EXPECT_TRUE(d.explain_sql) << "the plan comes after the webhook";
}

TEST(WebhookAnswer, FailuresDenyWithAReasonThatNamesNothingInternal) {
  const auto m = groups("g:\n  guards:\n" + webhookYaml("      headers:\n        Authorization: \"Bearer tok-123\"\n"));
  const PolicyGroup& g = *m.at("g");
  Prepared r = prepare("SELECT 1");
  const Decision p = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
  const std::vector<WebhookOutcome> failures = {
      {Status::kTimeout, 0, "", "Operation timed out after 1000 milliseconds with 0 bytes received", 2},
      {Status::kTransport, 0, "", "Failed to connect to policy.internal.example port 8181: Connection refused", 2},
      {Status::kHttpError, 503, "{}", "HTTP status 503", 2},
      {Status::kOverloaded, 0, "", "too many webhook requests waiting", 0},
      ok("this is {not json"),
      ok("[1,2]"),
      ok(R"({"action":"perhaps"})"),
      ok(R"({"action":"deny","code":"lower"})"),
      ok(R"({"action":"deny","reason":42})"),
      ok(""),
  };
  for (const auto& f : failures) {
    const Decision d = g.resumeWebhook(p, f, *r.analysis, r.sql, r.ctx, nullptr);
    ASSERT_TRUE(d.denied) << f.body << f.error;
    EXPECT_EQ(d.deny.code, "POLICY_UNAVAILABLE");
    EXPECT_EQ(d.deny.sqlstate, "58000");
    EXPECT_NE(d.deny.message.find("policy check is unavailable"), std::string::npos);
    EXPECT_NE(d.deny.message.find("Retry"), std::string::npos);
    for (const char* secret : {"policy.internal", "8181", "s3cret", "tok-123", "refused", "timed out", "503", "http"}) {
      EXPECT_EQ(d.deny.message.find(secret), std::string::npos) << secret;
      EXPECT_EQ(d.deny.detail.find(secret), std::string::npos) << secret;
      EXPECT_EQ(d.deny.hint.find(secret), std::string::npos) << secret;
    }
  }
}

TEST(WebhookAnswer, FailBehaviorAllow) {
  const auto m = groups("g:\n  guards:\n" + webhookYaml("      fail_behavior: allow\n"));
  const PolicyGroup& g = *m.at("g");
  Prepared r = prepare("SELECT 1");
  const Decision p = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
  const Decision d = g.resumeWebhook(p, WebhookOutcome{Status::kTimeout, 0, "", "t", 1}, *r.analysis, r.sql, r.ctx,
                                     nullptr);
  EXPECT_FALSE(d.denied);
  EXPECT_TRUE(d.actions.empty());
}

TEST(WebhookAnswer, UrlForLogDropsCredentialsAndQuery) {
  WebhookOptions o;
  o.url = "https://user:pw@policy.example/check?token=abc";
  EXPECT_EQ(WebhookGuard(o).urlForLog(), "https://policy.example/check");
}

TEST(WebhookConfig, HeadersFromLiteralEnvAndFile) {
  agent_test::TempDir dir;
  std::ofstream(dir.path() / "secret") << "from-file\n";
  ::setenv("PGW_TEST_WEBHOOK_TOKEN", "from-env", 1);
  const auto m = groups("g:\n  guards:\n" +
                        webhookYaml("      timeout_ms: 250\n      retries: 2\n      headers:\n"
                                    "        X-Literal: plain\n        X-Env: env:PGW_TEST_WEBHOOK_TOKEN\n"
                                    "        X-File: file:" + (dir.path() / "secret").string() + "\n"));
  const auto* w = static_cast<const WebhookGuard*>(m.at("g")->guards()[0].get());
  const auto& o = w->options();
  EXPECT_EQ(o.timeout.count(), 250);
  EXPECT_EQ(o.retries, 2);
  ASSERT_EQ(o.headers.size(), 3u);
  EXPECT_EQ(o.headers[0], std::make_pair(std::string("X-Literal"), std::string("plain")));
  EXPECT_EQ(o.headers[1].second, "from-env");
  EXPECT_EQ(o.headers[2].second, "from-file");
}

TEST(WebhookConfig, Errors) {
  auto fails = [](const std::string& guard, const std::string& needle) {
    try {
      (void)groups("g:\n  guards:\n    - kind: http_webhook\n" + guard);
      ADD_FAILURE() << "no error for " << guard;
    } catch (const config::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  fails("      timeout_ms: 100\n", "url");
  fails("      url: ftp://x/\n", "http://");
  fails("      url: http://x/\n      retries: 99\n", "out of range");
  fails("      url: http://x/\n      fail_behavior: sometimes\n", "deny or allow");
  fails("      url: http://x/\n      headers:\n        X-A: env:PGW_TEST_SURELY_UNSET_VAR\n", "not set");
  fails("      url: http://x/\n      headers:\n        X-A: file:/nonexistent/secret\n", "cannot read");
  fails("      url: http://x/\n      headers:\n        \"Bad Header\": v\n", "header name");
  fails("      url: http://x/\n      method: GET\n", "method");
}

TEST(Registry, KnowsEveryKind) {
  const auto kinds = budgets::agentGuardRegistry().kinds();
  for (const char* k : {"lua", "http_webhook", "budget", "read_only", "row_limit", "cost_gate"}) {
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), k), kinds.end()) << k;
  }
}

// What the chain reports to its observer: guard time once per guard and text (a guard the chain
// paused at is not counted again when it resumes), and the classification of webhook calls.
struct RecordingObserver final : GuardObserver {
  std::vector<std::string> kinds;
  std::vector<std::pair<External, CallResult>> calls;
  void guardEvaluated(std::string_view kind, std::chrono::nanoseconds spent) override {
    EXPECT_GE(spent.count(), 0);
    kinds.emplace_back(kind);
  }
  void externalCall(External kind, CallResult result, std::chrono::nanoseconds) override {
    calls.emplace_back(kind, result);
  }
};

TEST(ChainObserver, EachGuardTimedOncePerTextAcrossAWebhookPause) {
  const auto m = groups("g:\n  guards:\n    - kind: read_only\n" + webhookYaml() +
                        "    - kind: row_limit\n      max_rows: 5\n");
  const PolicyGroup& g = *m.at("g");
  Prepared r = prepare("SELECT 1; SELECT 2");
  RecordingObserver obs;
  r.ctx.observer = &obs;
  const Decision paused = g.evaluate(*r.analysis, r.sql, r.ctx, nullptr);
  ASSERT_TRUE(paused.webhook);
  EXPECT_EQ(obs.kinds, (std::vector<std::string>{"read_only", "http_webhook"}));
  const Decision done = g.resumeWebhook(paused, ok(R"({"action":"allow"})"), *r.analysis, r.sql, r.ctx, nullptr);
  EXPECT_FALSE(done.denied);
  EXPECT_EQ(obs.kinds, (std::vector<std::string>{"read_only", "http_webhook", "row_limit"}));
  // No observer: nothing is timed (and nothing breaks).
  Prepared quiet = prepare("SELECT 3");
  EXPECT_TRUE(g.evaluate(*quiet.analysis, quiet.sql, quiet.ctx, nullptr).webhook);
}

TEST(ChainObserver, DeniedChainStopsTimingAtTheDenyingGuard) {
  const auto m = groups("g:\n  guards:\n    - kind: read_only\n    - kind: row_limit\n      max_rows: 5\n");
  Prepared r = prepare("DELETE FROM t");
  RecordingObserver obs;
  r.ctx.observer = &obs;
  EXPECT_TRUE(m.at("g")->evaluate(*r.analysis, r.sql, r.ctx, nullptr).denied);
  EXPECT_EQ(obs.kinds, (std::vector<std::string>{"read_only"}));
}

TEST(WebhookCallResult, TimeoutsFailuresAndUnreadableAnswers) {
  using R = GuardObserver::CallResult;
  EXPECT_EQ(webhookCallResult(ok(R"({"action":"deny","code":"NO","reason":"no"})")), R::kOk);
  EXPECT_EQ(webhookCallResult(ok(R"({"action":"allow"})")), R::kOk);
  EXPECT_EQ(webhookCallResult(ok("not json")), R::kFailure);
  EXPECT_EQ(webhookCallResult(ok(R"({"action":"maybe"})")), R::kFailure);
  EXPECT_EQ(webhookCallResult(ok(R"({"action":"deny","code":"lower"})")), R::kFailure);
  EXPECT_EQ(webhookCallResult(WebhookOutcome{Status::kTimeout, 0, "", "deadline", 1}), R::kTimeout);
  EXPECT_EQ(webhookCallResult(WebhookOutcome{Status::kTransport, 0, "", "refused", 2}), R::kFailure);
  EXPECT_EQ(webhookCallResult(WebhookOutcome{Status::kHttpError, 503, "", "", 2}), R::kFailure);
  EXPECT_EQ(webhookCallResult(WebhookOutcome{Status::kOverloaded, 0, "", "", 0}), R::kFailure);
}

// ---- session housekeeping (drivers' own SET/SHOW/BEGIN/ROLLBACK/DISCARD/... and empty texts) ----

using agent_test::kHousekeeping;
using agent_test::kJudged;
using agent_test::kLuaBroken;
using agent_test::kWebhook;

WebhookOutcome refused() { return WebhookOutcome{Status::kTransport, 0, "", "Connection refused", 2}; }

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
