// Budgets: a statement counts once and only when admitted (a budget of 4 lets exactly 4 through),
// the reason tells the agent how to finish, keys are (user, conversation), windows and idle expiry,
// per-user token bucket and running count, max_denied/max_rows, the LRU bound, config errors.
#include <gtest/gtest.h>

#include "tests/unit/guards/agent_test_util.h"
#include "tests/unit/guards/housekeeping_texts.h"
#include "common/config_util.h"
#include "budgets/budget.h"

namespace pgwarden::guards {
namespace {

using agent_test::groups;
using Kind = budgets::BudgetLedger::Admission::Kind;

struct FakeClock {
  int64_t ms = 1'000'000;
  budgets::BudgetLedger::Clock fn() {
    return [this] { return ms; };
  }
};

PolicyMap budgetGroup(const std::string& keys) {
  return groups("g:\n  guards:\n    - kind: budget\n" + keys);
}

RequestContext ctxFor(const char* user, const char* conversation, budgets::BudgetLedger* ledger,
                      uint64_t session = 1) {
  RequestContext c;
  c.user = user;
  c.conversation_id = conversation;
  c.session_id = session;
  c.budgets = ledger;
  return c;
}

TEST(Budget, CountingBudgetOfFourLetsExactlyFourThrough) {
  const auto m = budgetGroup("      max_statements: 4\n");
  const PolicyGroup& g = *m.at("g");
  size_t index = 99;
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(g, &index);
  ASSERT_NE(bg, nullptr);
  EXPECT_EQ(index, 0u);
  budgets::BudgetLedger ledger;
  const RequestContext ctx = ctxFor("agent", "c-42", &ledger);
  const auto analysis = analysis::analyzeUncached("SELECT 1");
  int passed = 0;
  Verdict last;
  for (int i = 0; i < 10; ++i) {
    // The chain's look is read-only: evaluating twice must not count.
    (void)g.evaluate(*analysis, "SELECT 1", ctx, nullptr);
    const Decision d = g.evaluate(*analysis, "SELECT 1", ctx, nullptr);
    if (d.denied) {
      last = d.deny;
      continue;
    }
    const auto a = ledger.admit(*bg, ledger.keyFor(ctx));
    if (a.kind == Kind::kAdmitted) {
      ++passed;
      ledger.release(ledger.keyFor(ctx));
    } else {
      last = g.render(index, a.denial);
    }
  }
  EXPECT_EQ(passed, 4);
  EXPECT_EQ(ledger.counters(ledger.keyFor(ctx)).statements, 4);
  EXPECT_EQ(last.guard, "budget");
  EXPECT_EQ(last.code, "BUDGET_EXHAUSTED");
  EXPECT_EQ(last.sqlstate, "54000");
  EXPECT_EQ(last.message,
            "This conversation has used its budget of 4 queries. Do not run more. Answer with what you have "
            "found and say what you could not determine.");
  EXPECT_NE(last.detail.find("\"max_statements\":4"), std::string::npos) << last.detail;
}

TEST(Budget, AdmitChecksAgainEvenWhenTheChainSawRoom) {
  // Two statements of one conversation pass the chain before either runs: only one may run.
  const auto m = budgetGroup("      max_statements: 1\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger;
  const auto key = ledger.keyFor(ctxFor("agent", "c", &ledger));
  EXPECT_EQ(ledger.check(*bg, key).action, Action::kAllow);
  EXPECT_EQ(ledger.check(*bg, key).action, Action::kAllow);
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kDenied);
}

TEST(Budget, KeyedByUserAndConversationNeverConversationAlone) {
  const auto m = budgetGroup("      max_statements: 1\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger;
  EXPECT_EQ(ledger.admit(*bg, ledger.keyFor(ctxFor("alice", "shared", &ledger))).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, ledger.keyFor(ctxFor("bob", "shared", &ledger))).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, ledger.keyFor(ctxFor("alice", "shared", &ledger))).kind, Kind::kDenied);
  EXPECT_EQ(ledger.admit(*bg, ledger.keyFor(ctxFor("alice", "other", &ledger))).kind, Kind::kAdmitted);
  // A user name containing the separator cannot collide with another user's conversation.
  EXPECT_NE(budgets::BudgetKey({"a", "b:c"}).id(), budgets::BudgetKey({"a:b", "c"}).id());
  EXPECT_NE(budgets::BudgetKey({"a", "1:bc"}).id(), budgets::BudgetKey({"a1:b", "c"}).id());
}

TEST(Budget, NoConversationIdMeansTheSessionIsTheConversation) {
  const auto m = budgetGroup("      max_statements: 1\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger;
  const auto s1 = ledger.keyFor(ctxFor("agent", "", &ledger, 1));
  const auto s2 = ledger.keyFor(ctxFor("agent", "", &ledger, 2));
  EXPECT_NE(s1.conversation, s2.conversation);
  EXPECT_EQ(ledger.admit(*bg, s1).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, s2).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, s1).kind, Kind::kDenied);
  // Another ledger (another process) names its sessions differently.
  budgets::BudgetLedger other;
  EXPECT_NE(other.keyFor(ctxFor("agent", "", &other, 1)).conversation, s1.conversation);
}

TEST(Budget, ChainDeniesOnceSpentAndGroupReasonsApply) {
  const auto m = groups(R"(g:
  reasons:
    BUDGET_EXHAUSTED: "Stop now: {statements} of {max_statements} used."
  guards:
    - kind: budget
      max_statements: 2
    - kind: read_only
)");
  const PolicyGroup& g = *m.at("g");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(g);
  budgets::BudgetLedger ledger;
  const RequestContext ctx = ctxFor("agent", "c", &ledger);
  const auto analysis = analysis::analyzeUncached("SELECT 1");
  EXPECT_EQ(ledger.admit(*bg, ledger.keyFor(ctx)).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, ledger.keyFor(ctx)).kind, Kind::kAdmitted);
  const Decision d = g.evaluate(*analysis, "SELECT 1", ctx, nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.guard, "budget");
  EXPECT_EQ(d.deny.message, "Stop now: 2 of 2 used.");
  // Without a ledger in the context the guard has nothing to look at and passes.
  RequestContext bare = ctx;
  bare.budgets = nullptr;
  EXPECT_FALSE(g.evaluate(*analysis, "SELECT 1", bare, nullptr).denied);
}

TEST(Budget, GuardReasonOverride) {
  const auto m = budgetGroup("      max_statements: 3\n      reason: \"Budget of {max_statements} spent in {conversation_id}.\"\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger;
  const auto key = ledger.keyFor(ctxFor("agent", "c-9", &ledger));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
  const auto a = ledger.admit(*bg, key);
  ASSERT_EQ(a.kind, Kind::kDenied);
  EXPECT_EQ(a.denial.message, "Budget of 3 spent in c-9.");
}

TEST(Budget, WindowRestartsTheCount) {
  FakeClock clock;
  const auto m = budgetGroup("      max_statements: 2\n      window: 1m\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger(1000, clock.fn());
  const auto key = ledger.keyFor(ctxFor("agent", "c", &ledger));
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
  clock.ms += 30'000;
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kDenied);
  clock.ms += 29'000;
  EXPECT_EQ(ledger.check(*bg, key).action, Action::kDeny);
  clock.ms += 1'000;  // a minute after the window opened
  EXPECT_EQ(ledger.check(*bg, key).action, Action::kAllow);
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.counters(key).statements, 1);
}

TEST(Budget, IdleExpiryForgetsTheConversation) {
  FakeClock clock;
  const auto m = budgetGroup("      max_statements: 1\n      idle_expiry: 10m\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger(1000, clock.fn());
  const auto key = ledger.keyFor(ctxFor("agent", "c", &ledger));
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
  clock.ms += 9 * 60'000;
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kDenied);  // a denial is activity too
  clock.ms += 9 * 60'000;
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kDenied);
  EXPECT_EQ(ledger.size(), 1u);
  clock.ms += 10 * 60'000;
  ledger.sweep();
  EXPECT_EQ(ledger.size(), 0u);
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
}

TEST(Budget, PerUserRateIsATokenBucket) {
  FakeClock clock;
  const auto m = budgetGroup("      per_user_rate: 3\n");
  const PolicyGroup& g = *m.at("g");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(g);
  budgets::BudgetLedger ledger(1000, clock.fn());
  // The rate is per user, across conversations.
  for (int i = 0; i < 3; ++i) {
    const auto key = ledger.keyFor(ctxFor("agent", std::to_string(i).c_str(), &ledger));
    ASSERT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted) << i;
    ledger.release(key);
  }
  const auto key = ledger.keyFor(ctxFor("agent", "x", &ledger));
  const auto a = ledger.admit(*bg, key);
  ASSERT_EQ(a.kind, Kind::kDenied);
  EXPECT_EQ(a.denial.code, "RATE_LIMITED");
  EXPECT_EQ(a.denial.sqlstate, "53400");
  EXPECT_NE(a.denial.message.find("Wait about 20 seconds"), std::string::npos) << a.denial.message;
  // Another user is not affected.
  EXPECT_EQ(ledger.admit(*bg, ledger.keyFor(ctxFor("other", "x", &ledger))).kind, Kind::kAdmitted);
  clock.ms += 19'000;
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kDenied);
  clock.ms += 1'000;
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kDenied);
  // The chain sees it too.
  const RequestContext ctx = ctxFor("agent", "x", &ledger);
  const auto analysis = analysis::analyzeUncached("SELECT 1");
  EXPECT_EQ(g.evaluate(*analysis, "SELECT 1", ctx, nullptr).deny.code, "RATE_LIMITED");
}

TEST(Budget, PerUserConcurrentUntilRelease) {
  const auto m = budgetGroup("      per_user_concurrent: 2\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger;
  const auto a = ledger.keyFor(ctxFor("agent", "a", &ledger));
  const auto b = ledger.keyFor(ctxFor("agent", "b", &ledger));
  EXPECT_EQ(ledger.admit(*bg, a).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.admit(*bg, b).kind, Kind::kAdmitted);
  const auto third = ledger.admit(*bg, a);
  ASSERT_EQ(third.kind, Kind::kDenied);
  EXPECT_EQ(third.denial.code, "TOO_MANY_RUNNING");
  ledger.release(b);
  EXPECT_EQ(ledger.admit(*bg, a).kind, Kind::kAdmitted);
  ASSERT_EQ(ledger.users().size(), 1u);
  EXPECT_EQ(ledger.users()[0].running, 2);
  ledger.release(a);
  ledger.release(a);
  ledger.release(a);  // never below zero
  EXPECT_EQ(ledger.users()[0].running, 0);
}

TEST(Budget, MaxDeniedAndMaxRows) {
  const auto m = budgetGroup("      max_denied: 2\n      max_rows: 100\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger;
  const auto key = ledger.keyFor(ctxFor("agent", "c", &ledger));
  ledger.addDenied(*bg, key);
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kAdmitted);
  ledger.addDenied(*bg, key);
  auto a = ledger.admit(*bg, key);
  ASSERT_EQ(a.kind, Kind::kDenied);
  EXPECT_EQ(a.denial.code, "DENIED_EXHAUSTED");
  EXPECT_NE(a.denial.message.find("Answer with what you have found"), std::string::npos);

  const auto other = ledger.keyFor(ctxFor("agent", "d", &ledger));
  EXPECT_EQ(ledger.admit(*bg, other).kind, Kind::kAdmitted);
  ledger.addRows(*bg, other, 60);
  EXPECT_EQ(ledger.admit(*bg, other).kind, Kind::kAdmitted);
  ledger.addRows(*bg, other, 60);
  a = ledger.admit(*bg, other);
  ASSERT_EQ(a.kind, Kind::kDenied);
  EXPECT_EQ(a.denial.code, "ROWS_EXHAUSTED");
  EXPECT_EQ(ledger.counters(other).rows, 120);
  EXPECT_EQ(ledger.counters(other).statements, 2);
}

TEST(Budget, LruBoundHoldsAndAdminViewLists) {
  const auto m = budgetGroup("      max_statements: 5\n      max_conversations: 100\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger(bg->limits().max_conversations);
  for (int i = 0; i < 1000; ++i) {
    (void)ledger.admit(*bg, ledger.keyFor(ctxFor("agent", ("c" + std::to_string(i)).c_str(), &ledger)));
    ASSERT_LE(ledger.size(), 100u);
  }
  EXPECT_EQ(ledger.size(), 100u);
  EXPECT_EQ(ledger.evictions(), 900u);
  const auto list = ledger.conversations(10);
  ASSERT_EQ(list.size(), 10u);
  EXPECT_EQ(list[0].conversation, "c999");  // most recent first
  EXPECT_EQ(list[0].user, "agent");
  EXPECT_EQ(list[0].counters.statements, 1);
  ledger.setMaxConversations(10);
  EXPECT_EQ(ledger.size(), 10u);
}

TEST(BudgetConfig, Errors) {
  auto fails = [](const std::string& keys, const std::string& needle) {
    try {
      (void)budgetGroup(keys);
      ADD_FAILURE() << "no error for " << keys;
    } catch (const config::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_GT(e.line(), 0);
    }
  };
  fails("      max_statments: 4\n", "max_statments");
  fails("      reason: x\n", "at least one");
  fails("      max_statements: -1\n", "out of range");
  fails("      max_statements: 4\n      store: redis\n", "memory or postgres");
  fails("      max_statements: 4\n      store: postgres\n", "dsn");
  fails("      max_statements: 4\n      dsn: host=x\n", "only for store: postgres");
  fails("      max_statements: 4\n      store: postgres\n      dsn: \"host=db password=pw1 oops\"\n",
        "not a valid connection string (missing \"=\" after \"...\" in connection info string)");
  fails("      max_statements: 4\n      store: postgres\n      dsn: \"host=db sslmood=require\"\n",
        "not a valid connection string");
  fails("      max_statements: 4\n      fail_behavior: open\n", "deny or allow");
  fails("      max_statements: 4\n      idle_expiry: 0\n", "above zero");
  try {
    (void)groups("g:\n  guards:\n    - kind: budget\n      max_statements: 1\n    - kind: budget\n      max_rows: 1\n");
    ADD_FAILURE() << "two budget guards accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.key(), "groups.g.guards[1].kind");
    EXPECT_EQ(e.line(), 5);
  }
  const auto ok = budgetGroup("      max_statements: 4\n      store: postgres\n      dsn: host=db\n      timeout: 250ms\n"
                              "      fail_behavior: allow\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*ok.at("g"));
  EXPECT_TRUE(bg->store().shared);
  EXPECT_TRUE(bg->store().fail_open);
  EXPECT_EQ(bg->store().timeout.count(), 250);
}

TEST(Budget, SharedStoreWithoutFactoryAppliesFailBehavior) {
  const auto closed = budgetGroup("      max_statements: 4\n      store: postgres\n      dsn: host=db\n");
  const auto open = budgetGroup("      max_statements: 4\n      store: postgres\n      dsn: host=db\n      fail_behavior: allow\n");
  budgets::BudgetLedger ledger;
  const auto key = ledger.keyFor(ctxFor("agent", "c", &ledger));
  const auto a = ledger.admit(*budgets::findBudgetGuard(*closed.at("g")), key);
  ASSERT_EQ(a.kind, Kind::kDenied);
  EXPECT_EQ(a.denial.code, "BUDGET_UNAVAILABLE");
  EXPECT_EQ(a.denial.message.find("host"), std::string::npos);
  EXPECT_EQ(ledger.admit(*budgets::findBudgetGuard(*open.at("g")), key).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.storeFailures(), 2u);
}

}  // namespace
}  // namespace pgwarden::guards

namespace pgwarden::guards {
namespace {

TEST(Budget, SessionHousekeepingIsFree) {
  for (const char* sql : {"SET extra_float_digits = 3", "SET application_name = 'x'", "SHOW TimeZone", "BEGIN",
                          "COMMIT", "RESET ALL", "DISCARD ALL", "DEALLOCATE ALL", "", ";", "BEGIN; SET x = 1; COMMIT"}) {
    EXPECT_FALSE(budgets::countsAgainstBudget(*analysis::analyzeUncached(sql))) << sql;
  }
  for (const char* sql : {"SELECT 1", "BEGIN; SELECT 1; COMMIT", "EXPLAIN SELECT 1", "VALUES (1)", "FETCH 10 FROM c"}) {
    EXPECT_TRUE(budgets::countsAgainstBudget(*analysis::analyzeUncached(sql))) << sql;
  }
  // An exhausted conversation can still run a driver's setup statements.
  const auto m = groups("g:\n  guards:\n    - kind: budget\n      max_statements: 1\n");
  const PolicyGroup& g = *m.at("g");
  budgets::BudgetLedger ledger;
  RequestContext ctx;
  ctx.user = "agent";
  ctx.conversation_id = "c";
  ctx.budgets = &ledger;
  ASSERT_EQ(ledger.admit(*budgets::findBudgetGuard(g), ledger.keyFor(ctx)).kind,
            budgets::BudgetLedger::Admission::Kind::kAdmitted);
  EXPECT_TRUE(g.evaluate(*analysis::analyzeUncached("SELECT 1"), "SELECT 1", ctx, nullptr).denied);
  EXPECT_FALSE(g.evaluate(*analysis::analyzeUncached("SET extra_float_digits = 3"),
                          "SET extra_float_digits = 3", ctx, nullptr)
                   .denied);
}

TEST(Budget, MultiStatementTextCountsEachStatementOnceAndWhole) {
  const auto m = budgetGroup("      max_statements: 4\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger;
  const auto key = ledger.keyFor(ctxFor("agent", "c-multi", &ledger));
  EXPECT_EQ(budgets::budgetStatements(*analysis::analyzeUncached("SELECT 1; SELECT 2; SELECT 3")),
            3);
  EXPECT_EQ(
      budgets::budgetStatements(*analysis::analyzeUncached("BEGIN; SELECT 1; SET x = 1; COMMIT")),
      1);
  EXPECT_EQ(budgets::budgetStatements(*analysis::analyzeUncached("SHOW search_path")), 0);

  EXPECT_EQ(ledger.admit(*bg, key, {}, 3).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.counters(key).statements, 3);
  // Two do not fit in the one left: the text is refused whole, nothing is counted.
  const auto refused = ledger.admit(*bg, key, {}, 2);
  ASSERT_EQ(refused.kind, Kind::kDenied);
  EXPECT_EQ(refused.denial.code, "BUDGET_EXHAUSTED");
  EXPECT_NE(refused.denial.message.find("This text has 2 statements, and this conversation has 1 of its budget "
                                        "of 4 queries left."),
            std::string::npos)
      << refused.denial.message;
  EXPECT_EQ(ledger.counters(key).statements, 3);
  EXPECT_EQ(ledger.admit(*bg, key, {}, 1).kind, Kind::kAdmitted);
  EXPECT_EQ(ledger.counters(key).statements, 4);
  const auto spent = ledger.admit(*bg, key, {}, 1);
  ASSERT_EQ(spent.kind, Kind::kDenied);
  EXPECT_NE(spent.denial.message.find("has used its budget of 4 queries"), std::string::npos);
}

TEST(Budget, MultiStatementTextTakesOneRateTokenPerStatement) {
  FakeClock clock;
  const auto m = budgetGroup("      per_user_rate: 4\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger(1000, clock.fn());
  const auto key = ledger.keyFor(ctxFor("agent", "c", &ledger));
  EXPECT_EQ(ledger.admit(*bg, key, {}, 4).kind, Kind::kAdmitted);
  ledger.release(key);
  EXPECT_EQ(ledger.admit(*bg, key).kind, Kind::kDenied);
}

TEST(Budget, ExpiredConversationsAreSweptAsStatementsArrive) {
  // No timer and no explicit sweep: admitting statements drops idle conversations by itself,
  // so memory follows the live conversations, not every one ever seen.
  FakeClock clock;
  const auto m = budgetGroup("      max_statements: 100\n      idle_expiry: 1m\n");
  const budgets::BudgetGuard* bg = budgets::findBudgetGuard(*m.at("g"));
  budgets::BudgetLedger ledger(100000, clock.fn());
  for (int i = 0; i < 500; ++i) {
    (void)ledger.admit(*bg, ledger.keyFor(ctxFor("agent", ("c-" + std::to_string(i)).c_str(), &ledger)));
  }
  EXPECT_EQ(ledger.size(), 500u);
  clock.ms += 2 * 60'000;
  (void)ledger.admit(*bg, ledger.keyFor(ctxFor("agent", "c-new", &ledger)));
  EXPECT_EQ(ledger.size(), 1u);
  EXPECT_EQ(ledger.evictions(), 0u) << "expired, not evicted by the LRU bound";
  const auto stale = ledger.keyFor(ctxFor("agent", "c-stale", &ledger));
  (void)ledger.admit(*bg, stale);
  clock.ms += 61'000;
  (void)ledger.admit(*bg, ledger.keyFor(ctxFor("agent", "c-other", &ledger)));
  EXPECT_EQ(ledger.size(), 1u) << "the sweep 61 s later dropped c-new and c-stale";
}

// ---- one classification of session housekeeping for budgets and the external guards ----

using agent_test::kHousekeeping;
using agent_test::kJudged;

TEST(SessionHousekeeping, OneClassificationForBudgetsAndExternalGuards) {
  for (const auto& sql : kHousekeeping) {
    const auto a = analysis::analyzeUncached(sql);
    ASSERT_TRUE(a->ok) << sql << ": " << a->error;
    EXPECT_TRUE(isSessionHousekeeping(*a)) << sql;
    EXPECT_FALSE(budgets::countsAgainstBudget(*a)) << sql;
    EXPECT_EQ(budgets::budgetStatements(*a), 0) << sql;
  }
  for (const auto& sql : kJudged) {
    const auto a = analysis::analyzeUncached(sql);
    ASSERT_TRUE(a->ok) << sql << ": " << a->error;
    EXPECT_FALSE(isSessionHousekeeping(*a)) << sql;
    EXPECT_TRUE(budgets::countsAgainstBudget(*a)) << sql;
    EXPECT_GE(budgets::budgetStatements(*a), 1) << sql;
  }
  EXPECT_EQ(
      budgets::budgetStatements(*analysis::analyzeUncached("BEGIN; SELECT 1; SELECT 2; COMMIT")),
      2);
}

}  // namespace
}  // namespace pgwarden::guards
