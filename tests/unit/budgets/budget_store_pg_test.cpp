// The shared budget store against a real PostgreSQL made with initdb: two ledgers, each with its
// own store connection (two pgwarden processes), share one budget exactly, also when their admits
// race, and whether statements come one per text or several per text (each counted once, a text
// whole or not at all, refused with what is left); counters of rows and denied statements land in
// the table; a store that is down or stuck answers within the timeout with fail_behavior (deny or
// allow), and none of it blocks the loop. Admissions are pipelined: many upserts are on the wire
// at once (seen through a proxy that counts them while it holds the answers back), up to the
// store's bound, answered in the order they were asked, and a connection lost under them answers
// every one with fail_behavior.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "tests/unit/guards/agent_test_util.h"
#include "pg_wire_proxy.h"
#include "budgets/budget_store_pg.h"
#include "budgets/budget.h"
#include "require_tool.h"

namespace pgwarden::daemon {
namespace {

using agent_test::nowMs;
using agent_test::runUntil;
using budgets::BudgetLedger;
using Kind = BudgetLedger::Admission::Kind;

class SharedBudgetStore : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto bin = agent_test::findPgBin();
    if (bin.empty()) PGW_MISSING_TOOL("PostgreSQL server binaries not found");
    ASSERT_TRUE(server_.init(bin));
    ASSERT_EQ(uv_loop_init(&loop_), 0);
  }
  void TearDown() override {
    if (!loop_.data && uv_loop_alive(&loop_) == 0 && loop_.time == 0) return;
    ledgers_.clear();
    agent_test::drainLoop(&loop_);
  }

  BudgetLedger& ledger() {
    auto l = std::make_unique<BudgetLedger>();
    l->setStoreFactory([this](const budgets::BudgetStoreConfig& cfg) {
      return std::make_unique<budgets::BudgetStorePg>(&loop_, cfg);
    });
    ledgers_.push_back(std::move(l));
    return *ledgers_.back();
  }

  guards::PolicyMap group(const std::string& dsn, const std::string& extra = "", int max_statements = 5) {
    return agent_test::groups("g:\n  guards:\n    - kind: budget\n      max_statements: " +
                              std::to_string(max_statements) + "\n      store: postgres\n      dsn: \"" + dsn +
                              "\"\n" + extra);
  }

  // Admits and waits for the answer, running the loop.
  Kind admitSync(BudgetLedger& l, const budgets::BudgetGuard& g, const budgets::BudgetKey& key,
                 guards::GuardResult* denial = nullptr, int64_t statements = 1) {
    std::optional<BudgetLedger::Admission> out;
    auto a = l.admit(g, key, [&](BudgetLedger::Admission r) { out = std::move(r); }, statements);
    if (a.kind != Kind::kPending) {
      out = std::move(a);
    } else {
      EXPECT_TRUE(runUntil(&loop_, [&] { return out.has_value(); }, 15000));
    }
    if (denial && out) *denial = out->denial;
    return out ? out->kind : Kind::kPending;
  }

  std::string query(const std::string& sql) {
    PGconn* c = PQconnectdb(server_.dsn().c_str());
    PGresult* r = PQexec(c, sql.c_str());
    std::string v = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    PQfinish(c);
    return v;
  }

  agent_test::PostgresServer server_;
  uv_loop_t loop_{};
  std::vector<std::unique_ptr<BudgetLedger>> ledgers_;
};

TEST_F(SharedBudgetStore, TwoProcessesShareOneBudgetExactly) {
  const auto m = group(server_.dsn());
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& a = ledger();
  BudgetLedger& b = ledger();
  const budgets::BudgetKey key{"agent", "c-shared"};
  int admitted = 0;
  guards::GuardResult denial;
  for (int i = 0; i < 8; ++i) {
    admitted += admitSync(i % 2 ? a : b, *g, key, &denial) == Kind::kAdmitted;
  }
  EXPECT_EQ(admitted, 5);
  EXPECT_EQ(denial.code, "BUDGET_EXHAUSTED");
  EXPECT_NE(denial.message.find("budget of 5 queries"), std::string::npos) << denial.message;
  EXPECT_EQ(query("SELECT statements FROM pgwarden_budget WHERE username = 'agent' AND conversation_id = 'c-shared'"),
            "5");
  // The mirror each process keeps follows the shared truth.
  EXPECT_EQ(a.counters(key).statements, 5);
  // Another user with the same conversation id has a budget of its own.
  EXPECT_EQ(admitSync(a, *g, {"other", "c-shared"}), Kind::kAdmitted);
}

TEST_F(SharedBudgetStore, RacingAdmitsNeverOverspend) {
  const auto m = group(server_.dsn());
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& a = ledger();
  BudgetLedger& b = ledger();
  const budgets::BudgetKey key{"agent", "c-race"};
  // Warm both connections so the race is between upserts, not connects.
  ASSERT_EQ(admitSync(a, *g, {"agent", "warm-a"}), Kind::kAdmitted);
  ASSERT_EQ(admitSync(b, *g, {"agent", "warm-b"}), Kind::kAdmitted);
  int answered = 0;
  int admitted = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = (i % 2 ? a : b).admit(*g, key, [&](BudgetLedger::Admission x) {
      ++answered;
      admitted += x.kind == Kind::kAdmitted;
    });
    ASSERT_EQ(r.kind, Kind::kPending);
  }
  ASSERT_TRUE(runUntil(&loop_, [&] { return answered == 20; }, 15000));
  EXPECT_EQ(admitted, 5);
}

TEST_F(SharedBudgetStore, RowsAndDenialsAreShared) {
  const auto m = agent_test::groups("g:\n  guards:\n    - kind: budget\n      max_rows: 100\n      store: postgres\n"
                                    "      dsn: \"" + server_.dsn() + "\"\n");
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& a = ledger();
  BudgetLedger& b = ledger();
  const budgets::BudgetKey key{"agent", "c-rows"};
  ASSERT_EQ(admitSync(a, *g, key), Kind::kAdmitted);
  a.addRows(*g, key, 150);
  a.addDenied(*g, key);
  ASSERT_TRUE(runUntil(&loop_, [&] {
    return query("SELECT row_count FROM pgwarden_budget WHERE conversation_id = 'c-rows'") == "150";
  }));
  guards::GuardResult denial;
  EXPECT_EQ(admitSync(b, *g, key, &denial), Kind::kDenied);
  EXPECT_EQ(denial.code, "ROWS_EXHAUSTED");
  EXPECT_EQ(query("SELECT denied FROM pgwarden_budget WHERE conversation_id = 'c-rows'"), "1");
}

TEST_F(SharedBudgetStore, MultiStatementTextsCountEachStatementAcrossProcesses) {
  const auto m = group(server_.dsn(), "", 4);
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& a = ledger();
  BudgetLedger& b = ledger();
  const budgets::BudgetKey key{"agent", "c-multi"};
  const std::string count =
      "SELECT statements FROM pgwarden_budget WHERE username = 'agent' AND conversation_id = 'c-multi'";
  guards::GuardResult denial;
  ASSERT_EQ(admitSync(a, *g, key, &denial, 3), Kind::kAdmitted);
  EXPECT_EQ(query(count), "3");
  EXPECT_EQ(a.counters(key).statements, 3);
  // Two do not fit in the one left: refused whole, nothing counted, the same words as in memory.
  EXPECT_EQ(admitSync(b, *g, key, &denial, 2), Kind::kDenied);
  EXPECT_EQ(denial.code, "BUDGET_EXHAUSTED");
  EXPECT_EQ(denial.message, g->textOverBudget({3, 0, 0}, 2).message);
  EXPECT_NE(denial.message.find("This text has 2 statements, and this conversation has 1 of its budget of 4 "
                                "queries left."),
            std::string::npos)
      << denial.message;
  EXPECT_EQ(query(count), "3");
  EXPECT_EQ(admitSync(b, *g, key, &denial, 1), Kind::kAdmitted);
  EXPECT_EQ(query(count), "4");
  EXPECT_EQ(admitSync(a, *g, key, &denial, 1), Kind::kDenied);
  EXPECT_NE(denial.message.find("has used its budget of 4 queries"), std::string::npos) << denial.message;
  EXPECT_EQ(query(count), "4");
  EXPECT_EQ(a.counters(key).statements, 4);
}

TEST_F(SharedBudgetStore, TextLargerThanTheWholeBudgetCreatesNoRow) {
  const auto m = group(server_.dsn(), "", 4);
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& a = ledger();
  const budgets::BudgetKey key{"agent", "c-big"};
  guards::GuardResult denial;
  EXPECT_EQ(admitSync(a, *g, key, &denial, 5), Kind::kDenied);
  EXPECT_NE(denial.message.find("This text has 5 statements, and this conversation has 4 of its budget of 4 "
                                "queries left."),
            std::string::npos)
      << denial.message;
  EXPECT_EQ(query("SELECT count(*) FROM pgwarden_budget WHERE conversation_id = 'c-big'"), "0");
  EXPECT_EQ(admitSync(a, *g, key, &denial, 4), Kind::kAdmitted);
  EXPECT_EQ(query("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-big'"), "4");
}

TEST_F(SharedBudgetStore, ExpiredWindowStartsOverWithTheWholeText) {
  const auto m = group(server_.dsn(), "      window: 300ms\n", 4);
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& a = ledger();
  const budgets::BudgetKey key{"agent", "c-window"};
  guards::GuardResult denial;
  ASSERT_EQ(admitSync(a, *g, key, &denial, 3), Kind::kAdmitted);
  EXPECT_EQ(admitSync(a, *g, key, &denial, 2), Kind::kDenied);
  const int64_t t0 = nowMs();
  runUntil(&loop_, [&] { return nowMs() - t0 >= 500; }, 2000);
  // The window is over: a text too big for any window is refused against a fresh count...
  EXPECT_EQ(admitSync(a, *g, key, &denial, 5), Kind::kDenied);
  EXPECT_NE(denial.message.find("has 4 of its budget of 4 queries left"), std::string::npos) << denial.message;
  // ...and one that fits starts the new window with its own statements.
  EXPECT_EQ(admitSync(a, *g, key, &denial, 2), Kind::kAdmitted);
  EXPECT_EQ(query("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-window'"), "2");
}

TEST_F(SharedBudgetStore, RacingMultiStatementTextsNeverOverspend) {
  const auto m = group(server_.dsn());  // max_statements 5
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& a = ledger();
  BudgetLedger& b = ledger();
  const budgets::BudgetKey key{"agent", "c-race-multi"};
  ASSERT_EQ(admitSync(a, *g, {"agent", "warm-a"}), Kind::kAdmitted);
  ASSERT_EQ(admitSync(b, *g, {"agent", "warm-b"}), Kind::kAdmitted);
  int answered = 0;
  int64_t passed = 0;
  for (int i = 0; i < 12; ++i) {
    const int64_t n = 2;
    auto r = (i % 2 ? a : b).admit(*g, key, [&, n](BudgetLedger::Admission x) {
      ++answered;
      if (x.kind == Kind::kAdmitted) passed += n;
    }, n);
    ASSERT_EQ(r.kind, Kind::kPending);
  }
  ASSERT_TRUE(runUntil(&loop_, [&] { return answered == 12; }, 15000));
  EXPECT_EQ(passed, 4);  // two texts of two; a third would make 6
  // The one statement left is still there to take, once.
  EXPECT_EQ(admitSync(b, *g, key), Kind::kAdmitted);
  EXPECT_EQ(admitSync(a, *g, key), Kind::kDenied);
  EXPECT_EQ(query("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-race-multi'"), "5");
}

TEST_F(SharedBudgetStore, DeniedStatementsOfATextAllCountAcrossProcesses) {
  const auto m = agent_test::groups("g:\n  guards:\n    - kind: budget\n      max_denied: 3\n      store: postgres\n"
                                    "      dsn: \"" + server_.dsn() + "\"\n");
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& a = ledger();
  BudgetLedger& b = ledger();
  const budgets::BudgetKey key{"agent", "c-denied"};
  ASSERT_EQ(admitSync(a, *g, key), Kind::kAdmitted);
  a.addDenied(*g, key, 2);  // a denied text of two statements
  EXPECT_EQ(a.counters(key).denied, 2);
  ASSERT_TRUE(runUntil(&loop_, [&] {
    return query("SELECT denied FROM pgwarden_budget WHERE conversation_id = 'c-denied'") == "2";
  }));
  guards::GuardResult denial;
  EXPECT_EQ(admitSync(b, *g, key, &denial), Kind::kAdmitted);  // 2 of 3
  b.addDenied(*g, key, 1);
  ASSERT_TRUE(runUntil(&loop_, [&] {
    return query("SELECT denied FROM pgwarden_budget WHERE conversation_id = 'c-denied'") == "3";
  }));
  EXPECT_EQ(admitSync(a, *g, key, &denial, 2), Kind::kDenied);
  EXPECT_EQ(denial.code, "DENIED_EXHAUSTED");
  EXPECT_EQ(query("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-denied'"), "2");
}

TEST_F(SharedBudgetStore, StoreDownAppliesFailBehaviorWithinTheTimeout) {
  const std::string dead = "host=127.0.0.1 port=" + std::to_string(agent_test::freePort()) + " user=postgres";
  const auto closed = group(dead, "      timeout: 300ms\n");
  const auto open = group(dead, "      timeout: 300ms\n      fail_behavior: allow\n");
  BudgetLedger& l = ledger();
  const int64_t t0 = nowMs();
  guards::GuardResult denial;
  EXPECT_EQ(admitSync(l, *budgets::findBudgetGuard(*closed.at("g")), {"agent", "c"}, &denial),
            Kind::kDenied);
  EXPECT_LT(nowMs() - t0, 2000);
  EXPECT_EQ(denial.code, "BUDGET_UNAVAILABLE");
  EXPECT_EQ(denial.message.find("127.0.0.1"), std::string::npos);
  EXPECT_EQ(admitSync(l, *budgets::findBudgetGuard(*open.at("g")), {"agent", "c"}),
            Kind::kAdmitted);
  EXPECT_GE(l.storeFailures(), 2u);
}

TEST_F(SharedBudgetStore, StuckRowTimesOutAndTheLoopKeepsRunning) {
  // A large budget: an upsert that timed out may still have counted once its lock came free.
  const auto m = group(server_.dsn(), "      timeout: 300ms\n", 1000);
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& l = ledger();
  const budgets::BudgetKey key{"agent", "c-locked"};
  ASSERT_EQ(admitSync(l, *g, key), Kind::kAdmitted);
  // Another session holds the row: the upsert waits on its lock.
  PGconn* holder = PQconnectdb(server_.dsn().c_str());
  PQclear(PQexec(holder, "BEGIN"));
  PQclear(PQexec(holder, "SELECT * FROM pgwarden_budget WHERE conversation_id = 'c-locked' FOR UPDATE"));
  int ticks = 0;
  uv_timer_t tick;
  uv_timer_init(&loop_, &tick);
  tick.data = &ticks;
  uv_timer_start(&tick, [](uv_timer_t* t) { ++*static_cast<int*>(t->data); }, 10, 10);
  const int64_t t0 = nowMs();
  guards::GuardResult denial;
  EXPECT_EQ(admitSync(l, *g, key, &denial), Kind::kDenied);
  const int64_t elapsed = nowMs() - t0;
  EXPECT_EQ(denial.code, "BUDGET_UNAVAILABLE");
  // The answer came from the store's 300 ms timeout, not from the lock coming free (it never
  // does while the holder waits): the bound is loose so a loaded machine cannot fail it.
  EXPECT_GE(elapsed, 250);
  EXPECT_LT(elapsed, 10000);
  EXPECT_GE(ticks, 5) << "the loop was blocked while the store waited";
  uv_timer_stop(&tick);
  uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
  PQclear(PQexec(holder, "ROLLBACK"));
  PQfinish(holder);
  // The store recovers: the next admit is answered by the table again.
  EXPECT_TRUE(runUntil(&loop_, [&] { return admitSync(l, *g, key) == Kind::kAdmitted; }, 10000));
}

TEST_F(SharedBudgetStore, AdmissionsArePipelinedAndAnsweredInOrder) {
  agent_test::PgWireProxy proxy(server_.port());
  ASSERT_GT(proxy.port(), 0);
  const auto m = group(proxy.dsn(), "      timeout: 60s\n", 1000);
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& l = ledger();
  const budgets::BudgetKey key{"agent", "c-pipe"};
  ASSERT_EQ(admitSync(l, *g, key), Kind::kAdmitted);  // connected, table made
  // The answers are held back: a store that waits for each one before sending the next puts one
  // upsert on the wire and no more.
  proxy.hold(true);
  const int before = proxy.syncs();
  std::vector<int> order;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 10; ++i) {
    auto r = l.admit(*g, key, [&order, i](BudgetLedger::Admission x) {
      order.push_back(x.kind == Kind::kAdmitted ? i : -1);
    });
    ASSERT_EQ(r.kind, Kind::kPending);
    tickets.push_back(r.ticket);
  }
  ASSERT_TRUE(runUntil(&loop_, [&] { return proxy.syncs() - before >= 10; }, 10000))
      << "only " << proxy.syncs() - before << " of 10 admissions went out before the first answer";
  EXPECT_TRUE(order.empty());
  l.cancel(tickets[4]);  // its session ended while its upsert was on the wire
  proxy.hold(false);
  ASSERT_TRUE(runUntil(&loop_, [&] { return order.size() == 9; }, 10000));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 5, 6, 7, 8, 9}));
  EXPECT_EQ(query("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-pipe'"), "11");
}

TEST_F(SharedBudgetStore, InFlightUpsertsAreBoundedAndCancelledOnesNeverCount) {
  agent_test::PgWireProxy proxy(server_.port());
  const auto m = group(proxy.dsn(), "      timeout: 60s\n", 1000);
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  BudgetLedger& l = ledger();
  const budgets::BudgetKey key{"agent", "c-bound"};
  ASSERT_EQ(admitSync(l, *g, key), Kind::kAdmitted);
  proxy.hold(true);
  const int before = proxy.syncs();
  constexpr int kAdmits = 100;
  const int bound = static_cast<int>(budgets::BudgetStorePg::kMaxInFlight);
  int answered = 0;
  int admitted = 0;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < kAdmits; ++i) {
    tickets.push_back(l.admit(*g, key, [&](BudgetLedger::Admission x) {
                         ++answered;
                         admitted += x.kind == Kind::kAdmitted;
                       }).ticket);
  }
  ASSERT_TRUE(runUntil(&loop_, [&] { return proxy.syncs() - before >= bound; }, 10000));
  runUntil(&loop_, [] { return false; }, 200);  // time for more to go out, if the bound leaked
  EXPECT_EQ(proxy.syncs() - before, bound);
  // Still queued behind the bound: a cancelled admit is dropped, never sent, never counted.
  l.cancel(tickets[kAdmits - 1]);
  proxy.hold(false);
  ASSERT_TRUE(runUntil(&loop_, [&] { return answered == kAdmits - 1; }, 15000));
  EXPECT_EQ(admitted, kAdmits - 1);
  EXPECT_EQ(proxy.syncs() - before, kAdmits - 1);
  EXPECT_EQ(query("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-bound'"),
            std::to_string(kAdmits));
}

TEST_F(SharedBudgetStore, ManyConcurrentSessionsGetExactlyTheBudget) {
  constexpr int kBudget = 7;
  const auto m = group(server_.dsn(), "      timeout: 10s\n", kBudget);
  const auto* g = budgets::findBudgetGuard(*m.at("g"));
  std::vector<BudgetLedger*> processes;
  for (int p = 0; p < 4; ++p) {
    processes.push_back(&ledger());
    ASSERT_EQ(admitSync(*processes.back(), *g, {"agent", "warm-" + std::to_string(p)}), Kind::kAdmitted);
  }
  const budgets::BudgetKey key{"agent", "c-many"};
  int answered = 0;
  int admitted = 0;
  for (int i = 0; i < 200; ++i) {
    auto r = processes[i % processes.size()]->admit(*g, key, [&](BudgetLedger::Admission x) {
      ++answered;
      admitted += x.kind == Kind::kAdmitted;
    });
    ASSERT_EQ(r.kind, Kind::kPending);
  }
  ASSERT_TRUE(runUntil(&loop_, [&] { return answered == 200; }, 30000));
  EXPECT_EQ(admitted, kBudget);
  EXPECT_EQ(query("SELECT statements FROM pgwarden_budget WHERE conversation_id = 'c-many'"),
            std::to_string(kBudget));
}

TEST_F(SharedBudgetStore, ConnectionLostUnderPipelinedAdmitsAppliesFailBehaviorToEach) {
  agent_test::PgWireProxy proxy(server_.port());
  // A timeout far beyond the wait below: every answer comes from the lost connection.
  const auto closed = group(proxy.dsn(), "      timeout: 60s\n", 1000);
  const auto open = group(proxy.dsn(), "      timeout: 60s\n      fail_behavior: allow\n", 1000);
  const auto* deny = budgets::findBudgetGuard(*closed.at("g"));
  const auto* allow = budgets::findBudgetGuard(*open.at("g"));
  BudgetLedger& l = ledger();
  const budgets::BudgetKey key{"agent", "c-lost"};
  ASSERT_EQ(admitSync(l, *deny, key), Kind::kAdmitted);
  proxy.hold(true);
  const int before = proxy.syncs();
  std::vector<std::optional<BudgetLedger::Admission>> answers(10);
  for (int i = 0; i < 10; ++i) {
    auto r = l.admit(i % 2 ? *allow : *deny, key, [&answers, i](BudgetLedger::Admission x) { answers[i] = x; });
    ASSERT_EQ(r.kind, Kind::kPending);
  }
  ASSERT_TRUE(runUntil(&loop_, [&] { return proxy.syncs() - before >= 10; }, 10000));
  proxy.cut();
  ASSERT_TRUE(runUntil(&loop_, [&] {
    return std::all_of(answers.begin(), answers.end(), [](const auto& a) { return a.has_value(); });
  }, 15000));
  for (int i = 0; i < 10; ++i) {
    if (i % 2) {
      EXPECT_EQ(answers[i]->kind, Kind::kAdmitted) << i;
    } else {
      EXPECT_EQ(answers[i]->kind, Kind::kDenied) << i;
      EXPECT_EQ(answers[i]->denial.code, "BUDGET_UNAVAILABLE") << i;
    }
  }
  EXPECT_GE(l.storeFailures(), 10u);
  // The store connects again (after its back-off) and answers from the table.
  proxy.hold(false);
  EXPECT_EQ(admitSync(l, *deny, key), Kind::kAdmitted);
}

}  // namespace
}  // namespace pgwarden::daemon
