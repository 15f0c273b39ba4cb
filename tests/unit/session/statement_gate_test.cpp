// session: the statement gate. A statement is judged once: the chain runs once, a cost gate's
// EXPLAIN is asked for once and the verdict comes after its answer (never inside decide()), an
// EXPLAIN error is the statement's answer, and budget admission comes last, so only what will
// run is counted. A text libpg_query cannot parse goes to the server's parser, whose error is the
// answer; a text the server parses is still pgwarden's to refuse.
#include "session/statement_gate.h"

#include <optional>

#include "guards/untrusted.h"
#include "protocol/messages.h"
#include "tests/unit/session/session_test_util.h"

namespace pgwarden::daemon {
namespace {

using test::FakeCaller;

constexpr const char* kGroups =
    "gated:\n  search_path: [public]\n  guards:\n"
    "    - kind: cost_gate\n      tables: [\"public.fct_shipments\"]\n      max_cost: 50000\n"
    "    - kind: budget\n      max_statements: 2\n      per_user_concurrent: 5\n";

// An EXPLAIN (FORMAT JSON) answer: one scan of fct_shipments at `cost`.
std::string planJson(const char* node, double cost) {
  return std::string("[{\"Plan\": {\"Node Type\": \"") + node +
         "\", \"Relation Name\": \"fct_shipments\", \"Alias\": \"s\", \"Startup Cost\": 0.0, "
         "\"Total Cost\": " + std::to_string(cost) + ", \"Plan Rows\": 10}}]";
}

class GateTest : public ::testing::Test {
 protected:
  GateTest()
      : groups_(test::groupsFromYaml(kGroups)),
        engine_(64, 4096),
        caller_(groups_.at("gated").get()),
        gate_(services(), caller_, [this](session::GateVerdict v) {
          ++verdicts_;
          last_ = std::move(v);
        }) {
    caller_.budgets = &ledger_;
  }

  session::GateServices services() {
    session::GateServices s;
    s.policy = &engine_;
    s.budgets = &ledger_;
    s.stats = [stats = stats_] { return stats; };
    return s;
  }

  session::GateRequest query(const std::string& sql) {
    session::GateRequest r;
    r.sql = sql;
    r.admit = true;
    r.explain = session::GateRequest::Explain::kRun;
    return r;
  }

  int64_t counted() const {
    budgets::BudgetKey key{"agent", "c-1"};
    return ledger_.counters(key).statements;
  }

  std::shared_ptr<const analysis::TableStatsSnapshot> stats_ = test::sampleStats();
  guards::PolicyMap groups_;
  session::PolicyEngine engine_;
  budgets::BudgetLedger ledger_;
  FakeCaller caller_;
  session::StatementGate gate_;
  int verdicts_ = 0;
  std::optional<session::GateVerdict> last_;
};

// The gate clears its request field by field between statements (no new request built and
// moved in): every field must come back to a new request's value, and a long parameter list
// must not keep its storage.
TEST(GateRequest, ClearLeavesWhatANewRequestHolds) {
  session::GateRequest r;
  r.sql = "SELECT $1";
  r.plan = std::make_shared<session::StatementPlan>();
  r.overrides.agent_id = "a";
  r.overrides.conversation_id = "c";
  r.overrides.query_intent = "q";
  r.extended = r.admit = true;
  r.explain = session::GateRequest::Explain::kRunOrDefer;
  for (int i = 0; i < 200; ++i) {
    r.explain_args.param_types.push_back(23);
    r.explain_args.param_formats.push_back(0);
    r.explain_args.params.emplace_back(std::string(100, 'x'));
  }
  r.explain_args.bound = true;
  r.plan_check = [](const analysis::PlanSummary&) { return std::optional<guards::GuardResult>{}; };
  r.refusal = guards::GuardResult{};
  r.clear();
  const session::GateRequest fresh;
  EXPECT_TRUE(r.sql.empty());
  EXPECT_EQ(r.plan, nullptr);
  EXPECT_FALSE(r.overrides.any());
  EXPECT_EQ(r.extended, fresh.extended);
  EXPECT_EQ(r.admit, fresh.admit);
  EXPECT_EQ(r.explain, fresh.explain);
  EXPECT_TRUE(r.explain_args.param_types.empty());
  EXPECT_TRUE(r.explain_args.param_formats.empty());
  EXPECT_TRUE(r.explain_args.params.empty());
  EXPECT_EQ(r.explain_args.params.capacity(), 0u);  // 200 was more than is kept
  EXPECT_FALSE(r.explain_args.bound);
  EXPECT_FALSE(static_cast<bool>(r.plan_check));
  EXPECT_FALSE(r.refusal.has_value());
  // A short list keeps its storage for the next Bind.
  r.explain_args.params.resize(3);
  const auto* storage = r.explain_args.params.data();
  r.clear();
  EXPECT_TRUE(r.explain_args.params.empty());
  EXPECT_EQ(r.explain_args.params.data(), storage);
}

TEST_F(GateTest, AStatementWithNothingToWaitForIsDecidedAtOnce) {
  session::GateVerdict v;
  ASSERT_TRUE(gate_.decide(query("SELECT 1"), v));
  ASSERT_TRUE(v.plan);
  EXPECT_FALSE(v.plan->decision.denied);
  EXPECT_TRUE(v.budget_key);  // admitted: it will run
  EXPECT_TRUE(caller_.explains.empty());
  EXPECT_FALSE(gate_.waiting());
  EXPECT_EQ(verdicts_, 0);  // the callback is for verdicts that waited
  EXPECT_EQ(counted(), 1);
}

TEST_F(GateTest, TheCostGateWaitsForThePlanAndTheChainRunsOnce) {
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(query("SELECT * FROM fct_shipments WHERE status = 'DELAYED'"), v));
  EXPECT_TRUE(gate_.waiting());
  // The EXPLAIN runs on the caller's connection: a transaction-pooled caller keeps it.
  EXPECT_FALSE(gate_.waitingOutside());
  ASSERT_EQ(caller_.explains.size(), 1u);
  EXPECT_EQ(caller_.explains[0].sql.rfind("EXPLAIN (FORMAT JSON) ", 0), 0u) << caller_.explains[0].sql;
  EXPECT_FALSE(caller_.explains[0].extended);
  EXPECT_EQ(counted(), 0);  // not admitted before its plan is judged
  gate_.explainDone(planJson("Seq Scan", 120000));
  EXPECT_FALSE(gate_.waiting());
  ASSERT_EQ(verdicts_, 1);
  ASSERT_TRUE(last_->plan->decision.denied);
  EXPECT_EQ(last_->plan->decision.deny.code, "SEQ_SCAN");
  EXPECT_FALSE(last_->budget_key);
  EXPECT_EQ(counted(), 0);  // a denied statement spends no budget
  // The text was analysed and run through the chain once, not again when the plan came back.
  EXPECT_EQ(engine_.cacheHits() + engine_.cacheMisses(), 1u);
  // A late or repeated answer changes nothing.
  gate_.explainDone(planJson("Index Scan", 10));
  EXPECT_EQ(verdicts_, 1);
}

TEST_F(GateTest, APlanWithinTheGateIsAdmittedAfterIt) {
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(query("SELECT * FROM fct_shipments WHERE ship_date = '2024-01-01'"), v));
  gate_.explainDone(planJson("Index Scan", 900));
  ASSERT_EQ(verdicts_, 1);
  EXPECT_FALSE(last_->plan->decision.denied) << last_->plan->decision.deny.message;
  EXPECT_FALSE(last_->plan->decision.explain_sql.has_value());
  EXPECT_TRUE(last_->budget_key);
  EXPECT_EQ(counted(), 1);
}

TEST_F(GateTest, AnExplainErrorIsTheStatementsAnswerAndSpendsNoBudget) {
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(query("SELECT nope FROM fct_shipments WHERE status = 'x'"), v));
  const std::string error("E\0\0\0\x0bS42703\0\0", 13);
  gate_.explainFailed(error);
  ASSERT_EQ(verdicts_, 1);
  EXPECT_EQ(last_->explain_error, error);
  EXPECT_FALSE(last_->budget_key);
  EXPECT_EQ(counted(), 0);
}

TEST_F(GateTest, WithoutAServerConnectionThePlanIsUnavailable) {
  caller_.has_server = false;
  session::GateVerdict v;
  ASSERT_TRUE(gate_.decide(query("SELECT * FROM fct_shipments WHERE status = 'DELAYED'"), v));
  EXPECT_FALSE(v.plan->decision.explain_sql.has_value());
}

TEST_F(GateTest, AParseLeavesAPlanThatNeedsParametersToItsBind) {
  session::GateRequest r;
  r.sql = "SELECT * FROM fct_shipments WHERE ship_date = $1";
  r.extended = true;
  r.explain = session::GateRequest::Explain::kRunOrDefer;
  r.explain_args.param_types = {1082};
  session::GateVerdict parsed;
  ASSERT_TRUE(gate_.decide(std::move(r), parsed));
  ASSERT_TRUE(parsed.plan->decision.explain_sql.has_value());
  EXPECT_TRUE(parsed.plan->decision.explain_needs_params);
  EXPECT_TRUE(caller_.explains.empty());
  EXPECT_EQ(counted(), 0);  // a Parse is counted when it is executed

  // The Bind brings the values: the EXPLAIN runs with them.
  session::GateRequest bind;
  bind.plan = parsed.plan;
  bind.extended = true;
  bind.explain = session::GateRequest::Explain::kRun;
  bind.explain_args.param_types = {1082};
  bind.explain_args.params = {std::string("2024-01-01")};
  bind.explain_args.bound = true;
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(std::move(bind), v));
  ASSERT_EQ(caller_.explains.size(), 1u);
  EXPECT_TRUE(caller_.explains[0].extended);
  ASSERT_EQ(caller_.explains[0].args.params.size(), 1u);
  EXPECT_EQ(*caller_.explains[0].args.params[0], "2024-01-01");
  gate_.explainDone(planJson("Index Scan", 900));
  ASSERT_EQ(verdicts_, 1);
  EXPECT_FALSE(last_->plan->decision.denied);
  // The Execute admits it.
  session::GateRequest exec;
  exec.plan = last_->plan;
  exec.extended = true;
  exec.admit = true;
  ASSERT_TRUE(gate_.decide(std::move(exec), v));
  EXPECT_TRUE(v.budget_key);
  EXPECT_EQ(counted(), 1);
}

TEST_F(GateTest, TheBudgetIsCheckedLastAndRefusesWhatIsOverIt) {
  session::GateVerdict v;
  ASSERT_TRUE(gate_.decide(query("SELECT 1"), v));
  ASSERT_TRUE(gate_.decide(query("SELECT 2"), v));
  ASSERT_TRUE(gate_.decide(query("SELECT 3"), v));
  ASSERT_TRUE(v.plan->decision.denied);
  EXPECT_EQ(v.plan->decision.deny.code, "BUDGET_EXHAUSTED");
  EXPECT_FALSE(v.budget_key);
  EXPECT_EQ(counted(), 2);
}

TEST_F(GateTest, CancelAndDiscardGiveTheRunningSlotBack) {
  session::GateVerdict v;
  ASSERT_TRUE(gate_.decide(query("SELECT 1"), v));
  ASSERT_EQ(ledger_.users().size(), 1u);
  EXPECT_EQ(ledger_.users()[0].running, 1);
  gate_.discard(v);
  EXPECT_FALSE(v.budget_key);
  EXPECT_EQ(ledger_.users()[0].running, 0);
  // A statement dropped while it waits: no verdict comes.
  ASSERT_FALSE(gate_.decide(query("SELECT * FROM fct_shipments WHERE status = 'DELAYED'"), v));
  gate_.cancel();
  EXPECT_FALSE(gate_.waiting());
  gate_.explainDone(planJson("Index Scan", 10));
  EXPECT_EQ(verdicts_, 0);
}

// An ErrorResponse as PostgreSQL sends it (the whole message).
std::string serverError(const char* sqlstate, const char* message, const char* position,
                        const char* routine, const char* hint = "") {
  std::vector<protocol::Field> fields{
      {'S', "ERROR"}, {'V', "ERROR"}, {'C', sqlstate}, {'M', message}};
  if (*hint) fields.push_back({'H', hint});
  if (*position) fields.push_back({'P', position});
  fields.push_back({'R', routine});
  std::string out;
  protocol::writeErrorResponse(out, fields);
  return out;
}

TEST_F(GateTest, ATextTheParserRefusesIsPutToTheServersParserWhoseErrorIsTheAnswer) {
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(query("SELECT 123abc"), v));
  EXPECT_TRUE(gate_.waiting());
  EXPECT_FALSE(gate_.waitingOutside());  // it waits on the caller's own connection
  ASSERT_EQ(caller_.parse_checks.size(), 1u);
  EXPECT_EQ(caller_.parse_checks[0].sql, "SELECT 123abc");
  EXPECT_FALSE(caller_.parse_checks[0].extended);
  EXPECT_TRUE(caller_.explains.empty());
  EXPECT_EQ(verdicts_, 0);
  const std::string error = serverError(
      "42601", "trailing junk after numeric literal at or near \"123abc\"", "8", "scanner_yyerror");
  gate_.parseChecked(error);
  ASSERT_EQ(verdicts_, 1);
  EXPECT_EQ(last_->explain_error, error);
  // Not a denial of pgwarden's: the server refused the text, and history records its error.
  EXPECT_FALSE(last_->plan->decision.denied);
  EXPECT_EQ(last_->plan->guard_actions_json, "[]");
  EXPECT_FALSE(last_->budget_key);
  EXPECT_EQ(counted(), 0);
  EXPECT_FALSE(gate_.waiting());
  gate_.parseChecked(error);  // a late or repeated answer changes nothing
  EXPECT_EQ(verdicts_, 1);
}

TEST_F(GateTest, ATextTheServerParsesIsStillRefusedWithPgwardensOwnSyntaxError) {
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(query("SELEC 1"), v));
  gate_.parseChecked("");
  ASSERT_EQ(verdicts_, 1);
  EXPECT_TRUE(last_->explain_error.empty());
  ASSERT_TRUE(last_->plan->decision.denied);
  EXPECT_EQ(last_->plan->decision.deny.code, "SYNTAX_ERROR");
  EXPECT_EQ(last_->plan->decision.deny.sqlstate, "42601");
  EXPECT_FALSE(last_->budget_key);
  EXPECT_EQ(counted(), 0);
}

TEST_F(GateTest, TheParseMessagesRefusalOfSeveralStatementsAnswersAParseNeverAQuery) {
  const std::string several =
      serverError("42601", "cannot insert multiple commands into a prepared statement", "",
                  "exec_parse_message");
  // A Query: the server's parser took the text, so its statements would have run.
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(query("SELEC 1; SELECT 2"), v));
  gate_.parseChecked(several);
  ASSERT_EQ(verdicts_, 1);
  EXPECT_TRUE(last_->explain_error.empty());
  ASSERT_TRUE(last_->plan->decision.denied);
  EXPECT_EQ(last_->plan->decision.deny.code, "SYNTAX_ERROR");
  // A client's Parse of the same text: the server's answer to it is exactly that.
  session::GateRequest r;
  r.sql = "SELEC 1; SELECT 2";
  r.extended = true;
  r.explain = session::GateRequest::Explain::kRunOrDefer;
  r.explain_args.param_types = {23, 25};
  ASSERT_FALSE(gate_.decide(std::move(r), v));
  ASSERT_EQ(caller_.parse_checks.size(), 2u);
  EXPECT_TRUE(caller_.parse_checks[1].extended);
  EXPECT_EQ(caller_.parse_checks[1].args.param_types, (std::vector<uint32_t>{23, 25}));
  gate_.parseChecked(several);
  ASSERT_EQ(verdicts_, 2);
  EXPECT_EQ(last_->explain_error, several);
  EXPECT_FALSE(last_->plan->decision.denied);
}

TEST_F(GateTest, TheServersLimitsAnswerATextTooDeepForPgwarden) {
  // Deeper than pgwarden's walk (or its stack) goes: the server may refuse it with its own limit.
  std::string sql = "SELECT 1";
  for (int i = 0; i < 20000; ++i) sql += "+1";
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(query(sql), v));
  ASSERT_EQ(caller_.parse_checks.size(), 1u);
  const std::string error =
      serverError("54001", "stack depth limit exceeded", "", "check_stack_depth",
                  "Increase the configuration parameter \"max_stack_depth\"");
  gate_.parseChecked(error);
  ASSERT_EQ(verdicts_, 1);
  EXPECT_EQ(last_->explain_error, error);
}

TEST_F(GateTest, WhatTheServerCannotAnswerBetterIsNotAsked) {
  session::GateVerdict v;
  // Text that parses; text that is not UTF-8 (answered in the server's words already); a tool's
  // refused arguments.
  ASSERT_TRUE(gate_.decide(query("SELECT 1"), v));
  ASSERT_TRUE(gate_.decide(query("SELECT '\xff'"), v));
  EXPECT_EQ(v.plan->decision.deny.sqlstate, "22021");
  const std::string selec = "SELEC 1";  // the request only views its text
  session::GateRequest refused = query(selec);
  guards::GuardResult r;
  r.action = guards::Action::kDeny;
  r.code = "INVALID_ARGUMENTS";
  r.message = "bad arguments";
  refused.refusal = std::move(r);
  ASSERT_TRUE(gate_.decide(std::move(refused), v));
  EXPECT_TRUE(v.plan->decision.denied);
  EXPECT_TRUE(caller_.parse_checks.empty());
  // No connection to ask on: pgwarden's own syntax error, at once.
  caller_.has_server = false;
  ASSERT_TRUE(gate_.decide(query("SELEC 1"), v));
  EXPECT_EQ(v.plan->decision.deny.code, "SYNTAX_ERROR");
  EXPECT_TRUE(caller_.parse_checks.empty());
  EXPECT_EQ(verdicts_, 0);
}

TEST_F(GateTest, AParseCheckDroppedWhileItWaitsGivesNoVerdict) {
  session::GateVerdict v;
  ASSERT_FALSE(gate_.decide(query("SELEC 1"), v));
  gate_.cancel();
  EXPECT_FALSE(gate_.waiting());
  gate_.parseChecked("");
  EXPECT_EQ(verdicts_, 0);
}

// The data-flow rule: after a read of untrusted content, the conversation's writes are refused
// (UNTRUSTED_FLOW), a prepared write too when it is judged again at its Execute; the read itself
// comes with UNTRUSTED_READ; another conversation is not touched.
TEST(GateUntrusted, AConversationThatReadUntrustedContentMayNotWrite) {
  const auto groups =
      test::groupsFromYaml("flow:\n  untrusted_content: {columns: [public.reviews.body]}\n");
  session::PolicyEngine engine(64, 4096);
  guards::ConversationMarks marks;
  FakeCaller caller(groups.at("flow").get());
  session::GateServices services;
  services.policy = &engine;
  services.marks = &marks;
  session::StatementGate gate(services, caller, [](session::GateVerdict) {});
  const auto decide = [&gate](const std::string& sql,
                              std::shared_ptr<const session::StatementPlan> plan = nullptr) {
    session::GateRequest r;
    r.sql = sql;
    r.plan = std::move(plan);
    session::GateVerdict v;
    EXPECT_TRUE(gate.decide(std::move(r), v));
    return v.plan;
  };
  const std::string write = "UPDATE orders SET status = 'refunded' WHERE id = 42";
  const auto prepared = decide(write);
  EXPECT_FALSE(prepared->decision.denied);
  EXPECT_FALSE(decide("SELECT id, stars FROM reviews")->decision.denied);
  EXPECT_EQ(marks.size(), 0u);
  const auto read = decide("SELECT body FROM reviews WHERE id = 2");
  ASSERT_FALSE(read->decision.denied);
  ASSERT_EQ(read->decision.warnings.size(), 1u);
  EXPECT_EQ(read->decision.warnings[0].code, "UNTRUSTED_READ");
  EXPECT_NE(read->guard_actions_json.find("UNTRUSTED_READ"), std::string::npos);
  const auto denied = decide(write);
  ASSERT_TRUE(denied->decision.denied);
  EXPECT_EQ(denied->decision.deny.code, "UNTRUSTED_FLOW");
  EXPECT_EQ(denied->decision.deny.sqlstate, "42501");
  EXPECT_NE(denied->decision.deny.message.find("reviews.body"), std::string::npos);
  EXPECT_NE(denied->decision.deny.detail.find("next_step"), std::string::npos);
  EXPECT_TRUE(decide("", prepared)->decision.denied);  // the prepared write, at its Execute
  EXPECT_FALSE(decide("SELECT count(*) FROM reviews")->decision.denied);  // reads go on
  session::GateRequest other;
  other.sql = write;
  other.overrides.conversation_id = "c-2";
  session::GateVerdict v;
  ASSERT_TRUE(gate.decide(std::move(other), v));
  EXPECT_FALSE(v.plan->decision.denied);
}

}  // namespace
}  // namespace pgwarden::daemon
