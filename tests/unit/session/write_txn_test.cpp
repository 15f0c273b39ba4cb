// Unit tests of the guarded-writes state machine (session/write_txn.h): every move, every code a
// text can get before it runs, the row caps, the timeouts and the notices, without sockets.
#include "session/write_txn.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>

#include "analysis/analysis.h"
#include "guards/codes.h"
#include "guards/policy.h"
#include "protocol/messages.h"
#include "session/statement_gate.h"
#include "tests/unit/guards/guard_test_util.h"
#include "tests/unit/session/session_test_util.h"

namespace pgwarden::daemon {
namespace {

constexpr const char* kGroups = R"(
writers:
  mode: guarded_writes
  search_path: [public]
  max_rows_affected: {statement: 100, transaction: 150}
  transaction_idle_timeout: 60s
  transaction_max_age: 10m
ddl_writers:
  mode: guarded_writes
  allow_ddl: true
)";

class WriteTxnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    groups_ = guards::parsePolicyGroups(YAML::Load(kGroups));
    group_ = groups_.at("writers").get();
  }

  // The judgement of `sql` by `w` (simple protocol unless `extended`).
  session::WriteTransaction::Judgement judge(const session::WriteTransaction& w,
                                             const std::string& sql, bool extended = false,
                                             const guards::PolicyGroup* group = nullptr) {
    analysis_ = analysis::analyzeUncached(sql);
    EXPECT_TRUE(analysis_->ok) << sql;
    ctx_.group = "writers";
    const guards::GuardInput in{*analysis_, sql, ctx_, nullptr, (group ? group : group_)->settings()};
    return w.judge(in, extended);
  }
  std::string code(const session::WriteTransaction& w, const std::string& sql,
                   bool extended = false, const guards::PolicyGroup* group = nullptr) {
    auto j = judge(w, sql, extended, group);
    return j.deny ? j.deny->code : std::string("pass");
  }
  // A transaction open, with `table` looked at.
  session::WriteTransaction openWith(const std::string& table, uint64_t now = 1000) {
    session::WriteTransaction w(group_->writes());
    EXPECT_TRUE(w.move(session::TxnEvent::kServerInTxn, now));
    auto a = analysis::analyzeUncached("SELECT * FROM " + table);
    w.noteRead(a->statements.at(0));
    return w;
  }

  guards::PolicyMap groups_;
  const guards::PolicyGroup* group_ = nullptr;
  std::shared_ptr<const analysis::Analysis> analysis_;
  guards::RequestContext ctx_;
};

TEST_F(WriteTxnTest, ConfigDefaultsAndValues) {
  const auto& w = group_->writes();
  EXPECT_TRUE(w.guarded);
  EXPECT_EQ(w.max_rows_statement, 100);
  EXPECT_EQ(w.max_rows_transaction, 150);
  EXPECT_FALSE(w.allow_ddl);
  EXPECT_TRUE(w.read_checks && w.function_checks);
  const auto& d = groups_.at("ddl_writers")->writes();
  EXPECT_EQ(d.max_rows_statement, 100);
  EXPECT_EQ(d.max_rows_transaction, 1000);
  EXPECT_EQ(d.idle_timeout.count(), 60000);
  EXPECT_EQ(d.max_age.count(), 600000);
  EXPECT_TRUE(d.allow_ddl);
}

TEST_F(WriteTxnTest, ConfigMistakesStopStartUp) {
  // A write group listing read_only, write keys in a read-only group, an unknown mode.
  EXPECT_ANY_THROW(guards::parsePolicyGroups(YAML::Load(
      "g: {mode: guarded_writes, guards: [{kind: read_only}]}")));
  EXPECT_ANY_THROW(guards::parsePolicyGroups(YAML::Load("g: {allow_ddl: true}")));
  EXPECT_ANY_THROW(guards::parsePolicyGroups(YAML::Load("g: {mode: read_write}")));
  EXPECT_ANY_THROW(guards::parsePolicyGroups(YAML::Load(
      "g: {mode: guarded_writes, max_rows_affected: {statement: 0}}")));
  EXPECT_FALSE(guards::parsePolicyGroups(YAML::Load("g: {guards: []}")).at("g")->writes().guarded);
}

TEST_F(WriteTxnTest, EveryLegalMove) {
  session::WriteTransaction w(group_->writes());
  EXPECT_EQ(w.state(), session::TxnState::kNone);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerIdle, 1));
  EXPECT_EQ(w.state(), session::TxnState::kNone);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerInTxn, 2));
  EXPECT_EQ(w.state(), session::TxnState::kOpen);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerInTxn, 3));
  EXPECT_EQ(w.state(), session::TxnState::kOpen);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerFailed, 4));
  EXPECT_EQ(w.state(), session::TxnState::kFailed);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerInTxn, 5));  // ROLLBACK TO a client savepoint
  EXPECT_EQ(w.state(), session::TxnState::kOpen);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerIdle, 6));  // COMMIT or ROLLBACK
  EXPECT_EQ(w.state(), session::TxnState::kNone);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerFailed, 7));
  EXPECT_EQ(w.state(), session::TxnState::kFailed);
  EXPECT_TRUE(w.move(session::TxnEvent::kExpired, 8));
  EXPECT_EQ(w.state(), session::TxnState::kRolledBack);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerIdle, 9));  // the answer to pgwarden's ROLLBACK
  EXPECT_EQ(w.state(), session::TxnState::kRolledBack);
  EXPECT_TRUE(w.move(session::TxnEvent::kTold, 10));
  EXPECT_EQ(w.state(), session::TxnState::kNone);
  EXPECT_TRUE(w.move(session::TxnEvent::kServerInTxn, 11));
  EXPECT_TRUE(w.move(session::TxnEvent::kExpired, 12));
  EXPECT_EQ(w.state(), session::TxnState::kRolledBack);
}

TEST_F(WriteTxnTest, IllegalMovesChangeNothing) {
  session::WriteTransaction w(group_->writes());
  EXPECT_FALSE(w.move(session::TxnEvent::kExpired, 1));  // nothing to roll back
  EXPECT_FALSE(w.move(session::TxnEvent::kTold, 1));
  EXPECT_EQ(w.state(), session::TxnState::kNone);
  ASSERT_TRUE(w.move(session::TxnEvent::kServerInTxn, 1));
  EXPECT_FALSE(w.move(session::TxnEvent::kTold, 2));
  EXPECT_EQ(w.state(), session::TxnState::kOpen);
  ASSERT_TRUE(w.move(session::TxnEvent::kExpired, 3));
  EXPECT_FALSE(w.move(session::TxnEvent::kServerInTxn, 4));  // the client was not told yet
  EXPECT_FALSE(w.move(session::TxnEvent::kServerFailed, 4));
  EXPECT_FALSE(w.move(session::TxnEvent::kExpired, 4));
  EXPECT_EQ(w.state(), session::TxnState::kRolledBack);
}

TEST_F(WriteTxnTest, WriteOutsideTransactionIsRequiredToBegin) {
  session::WriteTransaction w(group_->writes());
  auto a = analysis::analyzeUncached("SELECT * FROM items");
  w.noteRead(a->statements.at(0));
  EXPECT_EQ(code(w, "UPDATE items SET qty = 1 WHERE id = 1"), "TRANSACTION_REQUIRED");
  EXPECT_EQ(code(w, "INSERT INTO items VALUES (1)"), "TRANSACTION_REQUIRED");
  EXPECT_EQ(code(w, "DELETE FROM items WHERE id = 1"), "TRANSACTION_REQUIRED");
  EXPECT_EQ(code(w, "MERGE INTO items t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE"),
            "TRANSACTION_REQUIRED");
  EXPECT_EQ(code(w, "BEGIN"), "pass");
  EXPECT_EQ(code(w, "SELECT * FROM items"), "pass");
}

TEST_F(WriteTxnTest, LookFirstNamesTheTableAndHowToLook) {
  session::WriteTransaction w = openWith("other");
  auto j = judge(w, "UPDATE items SET qty = 1 WHERE id = 1");
  ASSERT_TRUE(j.deny);
  EXPECT_EQ(j.deny->code, "LOOK_FIRST");
  EXPECT_NE(j.deny->message.find("items"), std::string::npos);
  EXPECT_EQ(j.deny->hint, "SELECT * FROM items LIMIT 10");
  // Looking at it (qualified or not) lets the write run, inside pgwarden's savepoint.
  auto a = analysis::analyzeUncached("SELECT count(*) FROM public.items WHERE id < 3");
  w.noteRead(a->statements.at(0));
  j = judge(w, "UPDATE items SET qty = 1 WHERE id = 1");
  EXPECT_FALSE(j.deny);
  EXPECT_TRUE(j.wrap);
  EXPECT_EQ(j.table, "items");
  EXPECT_EQ(j.command, "UPDATE");
}

TEST_F(WriteTxnTest, MissingOrTrivialPredicate) {
  session::WriteTransaction w = openWith("items");
  EXPECT_EQ(code(w, "UPDATE items SET qty = 1"), "MISSING_PREDICATE");
  EXPECT_EQ(code(w, "UPDATE items SET qty = 1 WHERE 1=1"), "MISSING_PREDICATE");
  EXPECT_EQ(code(w, "DELETE FROM items WHERE true"), "MISSING_PREDICATE");
  EXPECT_EQ(code(w, "DELETE FROM items"), "MISSING_PREDICATE");
  EXPECT_EQ(code(w, "DELETE FROM items WHERE id = 4"), "pass");
  // Whatever the transaction state: no WHERE, no write.
  session::WriteTransaction none(group_->writes());
  EXPECT_EQ(code(none, "UPDATE items SET qty = 1"), "MISSING_PREDICATE");
}

TEST_F(WriteTxnTest, DdlFollowsAllowDdl) {
  session::WriteTransaction w = openWith("items");
  EXPECT_EQ(code(w, "CREATE TABLE t2 (a int)"), "DDL_NOT_ALLOWED");
  EXPECT_EQ(code(w, "TRUNCATE items"), "DDL_NOT_ALLOWED");
  EXPECT_EQ(code(w, "DROP TABLE items"), "DDL_NOT_ALLOWED");
  const guards::PolicyGroup* ddl = groups_.at("ddl_writers").get();
  session::WriteTransaction d(ddl->writes());
  EXPECT_EQ(code(d, "CREATE TABLE t2 (a int)", false, ddl), "TRANSACTION_REQUIRED");
  ASSERT_TRUE(d.move(session::TxnEvent::kServerInTxn, 1));
  auto j = judge(d, "CREATE TABLE t2 (a int)", false, ddl);
  EXPECT_FALSE(j.deny) << (j.deny ? j.deny->code + " " + j.deny->message : "");
  EXPECT_FALSE(j.wrap);  // no rows to count
  EXPECT_EQ(code(d, "TRUNCATE items", false, ddl), "LOOK_FIRST");
  // Privileges and code that runs later are never DDL a write group may run.
  EXPECT_EQ(code(d, "GRANT ALL ON items TO PUBLIC", false, ddl), "WRITE_ESCAPE");
  EXPECT_EQ(code(d, "ALTER ROLE me SUPERUSER", false, ddl), "WRITE_ESCAPE");
  EXPECT_EQ(code(d, "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", false, ddl),
            "WRITE_ESCAPE");
  EXPECT_EQ(code(d, "CREATE TRIGGER t AFTER INSERT ON items EXECUTE FUNCTION f()", false, ddl),
            "WRITE_ESCAPE");
}

// The escapes themselves are the corpus below; these are their look-alikes that must still pass.
TEST_F(WriteTxnTest, WhatTheEscapeChecksLetThrough) {
  session::WriteTransaction w = openWith("items");
  EXPECT_EQ(code(w, "SAVEPOINT mine"), "pass");
  EXPECT_EQ(code(w, "ROLLBACK TO SAVEPOINT mine"), "pass");
  EXPECT_EQ(code(w, "COMMIT AND NO CHAIN"), "pass");
  EXPECT_EQ(code(w, "BEGIN"), "pass");  // PostgreSQL only warns: nothing changes
  EXPECT_EQ(code(w, "EXPLAIN DELETE FROM items WHERE id = 1"), "pass");
  EXPECT_EQ(code(w, "SELECT * FROM items", true), "pass");
  EXPECT_EQ(code(w, "UPDATE items SET qty = 1 WHERE id = 1 RETURNING *"), "pass");
  EXPECT_EQ(code(w, "UPDATE items SET qty = 1 WHERE id = 1", true), "pass");
}

// Over the extended protocol the text is judged at Parse without the transaction's state (a
// driver sends BEGIN and the write in one batch); each Execute is judged when it runs.
TEST_F(WriteTxnTest, ExtendedWritesAreJudgedAgainAtEachExecute) {
  session::WriteTransaction none(group_->writes());
  auto j = judge(none, "UPDATE items SET qty = 1 WHERE id = 1", true);
  EXPECT_FALSE(j.deny);
  EXPECT_TRUE(j.wrap && j.at_execute);
  EXPECT_EQ(j.table, "items");
  EXPECT_EQ(code(none, "UPDATE items SET qty = 1", true), "MISSING_PREDICATE");  // at Parse still
  const auto a = analysis::analyzeUncached("UPDATE items SET qty = 1 WHERE id = 1");
  const auto& st = a->statements.at(0);
  auto d = none.judgeExecute(st, false);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->code, "TRANSACTION_REQUIRED");
  d = none.judgeExecute(st, true);  // its BEGIN is on the way, in the same batch
  ASSERT_TRUE(d);
  EXPECT_EQ(d->code, "LOOK_FIRST");
  session::WriteTransaction open = openWith("items");
  EXPECT_FALSE(open.judgeExecute(st, false));
  session::WriteTransaction other = openWith("other");
  d = other.judgeExecute(st, false);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->code, "LOOK_FIRST");
}

TEST_F(WriteTxnTest, RowCapsPerStatementAndTransaction) {
  session::WriteTransaction w = openWith("items");
  auto over = w.onWriteDone("items", "UPDATE", 400);
  ASSERT_TRUE(over);
  EXPECT_EQ(over->code, "TOO_MANY_ROWS");
  EXPECT_NE(over->facts.json("TOO_MANY_ROWS").find("\"rows\":400"), std::string::npos);
  EXPECT_NE(over->facts.json("TOO_MANY_ROWS").find("\"scope\":\"statement\""), std::string::npos);
  EXPECT_EQ(w.totals().rows, 0);  // undone: not counted
  EXPECT_FALSE(w.onWriteDone("items", "UPDATE", 100));
  EXPECT_FALSE(w.onWriteDone("other", "INSERT", 50));
  over = w.onWriteDone("items", "DELETE", 1);
  ASSERT_TRUE(over);
  EXPECT_NE(over->facts.json("TOO_MANY_ROWS").find("\"scope\":\"transaction\""), std::string::npos);
  EXPECT_EQ(w.totals().rows, 150);
  EXPECT_EQ(w.totals().writes, 2);
  EXPECT_EQ(w.totals().summary, "items: 100 rows; other: 50 rows");
  w.clear();
  EXPECT_EQ(w.totals().rows, 0);
  EXPECT_EQ(w.totals().summary, "no changes");
}

TEST_F(WriteTxnTest, IdleAndAgeTimeouts) {
  session::WriteTransaction w = openWith("items", 1000);
  EXPECT_FALSE(w.due(1000 + 59999));
  EXPECT_EQ(w.due(1000 + 60000), session::TxnEnd::kIdleTimeout);
  // Busy all along, but older than max_age.
  for (uint64_t t = 1000; t < 1000 + 600000; t += 30000)
    ASSERT_TRUE(w.move(session::TxnEvent::kServerInTxn, t));
  EXPECT_EQ(w.due(1000 + 600000), session::TxnEnd::kMaxAge);
  session::WriteTransaction none(group_->writes());
  EXPECT_FALSE(none.due(1u << 30));
}

TEST_F(WriteTxnTest, RolledBackTransactionIsToldOnce) {
  session::WriteTransaction w = openWith("items", 1000);
  ASSERT_FALSE(w.onWriteDone("items", "UPDATE", 4));
  ASSERT_TRUE(w.move(session::TxnEvent::kExpired, 70000));
  EXPECT_EQ(w.expiredBy(), session::TxnEnd::kIdleTimeout);
  w.clear();
  auto j = judge(w, "SELECT 1");
  ASSERT_TRUE(j.deny);
  EXPECT_EQ(j.deny->code, "TRANSACTION_ROLLED_BACK");
  const std::string detail = j.deny->facts.json(j.deny->code);
  EXPECT_NE(detail.find("\"lost\":\"items: 4 rows\""), std::string::npos) << detail;
  EXPECT_NE(detail.find("\"reason\":\"idle_timeout\""), std::string::npos) << detail;
  ASSERT_TRUE(w.move(session::TxnEvent::kTold, 70001));
  EXPECT_EQ(code(w, "SELECT 1"), "pass");
}

TEST_F(WriteTxnTest, NoticesCarryChangesTimeLeftAndNextMoves) {
  session::WriteTransaction w = openWith("items", 1000);
  ASSERT_FALSE(w.onWriteDone("items", "UPDATE", 4));
  const auto open = w.openNotice(2000);
  EXPECT_EQ(open.code, "TRANSACTION_OPEN");
  EXPECT_EQ(open.sqlstate, "00000");
  EXPECT_NE(open.message.find("items: 4 rows"), std::string::npos) << open.message;
  EXPECT_NE(open.message.find("COMMIT"), std::string::npos);
  EXPECT_NE(open.detail.find("\"next_moves\":[\"SELECT\",\"COMMIT\",\"ROLLBACK\"]"), std::string::npos)
      << open.detail;
  EXPECT_NE(open.detail.find("\"statements\":[\"UPDATE items 4\"]"), std::string::npos) << open.detail;
  EXPECT_NE(open.detail.find("\"seconds_left\":60"), std::string::npos) << open.detail;
  const auto kept = w.endNotice(true);
  EXPECT_EQ(kept.code, "TRANSACTION_COMMITTED");
  EXPECT_EQ(kept.message, "Committed; kept: items: 4 rows.");
  EXPECT_EQ(w.endNotice(false).code, "TRANSACTION_DISCARDED");
  ASSERT_TRUE(w.move(session::TxnEvent::kServerFailed, 3000));
  EXPECT_NE(w.openNotice(3000).detail.find("\"next_moves\":[\"ROLLBACK\"]"), std::string::npos);
}

// What both front ends do at a statement's CommandComplete and ReadyForQuery, and after a denial.
TEST_F(WriteTxnTest, StatementEndsMoveTheStateAndSayWhatTheAgentHears) {
  session::WriteTransaction w(group_->writes());
  auto a = analysis::analyzeUncached("SELECT * FROM items WHERE id = 1");
  EXPECT_EQ(w.onCommandComplete(&a->statements.at(0), "SELECT 1", std::nullopt).txn_rows, -1);
  EXPECT_TRUE(w.looked("", "items"));  // a completed read is a look
  auto begun = w.afterStatement('T', "BEGIN", 1000);
  ASSERT_TRUE(begun.moved && begun.notice);
  EXPECT_EQ(w.state(), session::TxnState::kOpen);
  EXPECT_EQ(begun.notice->code, "TRANSACTION_OPEN");
  EXPECT_FALSE(begun.ended);
  const std::string table = "items";
  auto wide = w.onCommandComplete(nullptr, "UPDATE 400",
                                  session::WriteTransaction::Wrapped{table, "UPDATE"});
  ASSERT_TRUE(wide.over);
  EXPECT_EQ(wide.over->code, "TOO_MANY_ROWS");
  EXPECT_EQ(wide.rows, 400);
  EXPECT_FALSE(wide.counted);
  auto narrow =
      w.onCommandComplete(nullptr, "UPDATE 4", session::WriteTransaction::Wrapped{table, "UPDATE"});
  EXPECT_TRUE(narrow.counted && !narrow.over && !narrow.measure);  // a plain table: its tag counts
  EXPECT_EQ(narrow.rows, 4);
  // A denial inside the transaction: it is as it was, and the agent hears so.
  auto again = w.afterDenial("MISSING_PREDICATE", 1500);
  ASSERT_TRUE(again);
  EXPECT_NE(again->message.find("items: 4 rows"), std::string::npos) << again->message;
  EXPECT_EQ(w.onCommandComplete(nullptr, "COMMIT", std::nullopt).txn_rows, 4);
  auto kept = w.afterStatement('I', "COMMIT", 2000);
  ASSERT_TRUE(kept.moved && kept.notice && kept.ended);
  EXPECT_EQ(*kept.ended, session::TxnEnd::kCommitted);
  EXPECT_EQ(kept.notice->message, "Committed; kept: items: 4 rows.");
  EXPECT_EQ(w.state(), session::TxnState::kNone);
  EXPECT_EQ(w.totals().rows, 0);
  EXPECT_FALSE(w.afterDenial("TRANSACTION_REQUIRED", 2500));  // nothing open: nothing to say
  // A failed transaction ends discarded, whatever its last word.
  ASSERT_TRUE(w.afterStatement('T', "BEGIN", 3000).moved);
  ASSERT_TRUE(w.afterStatement('E', "", 3100).moved);
  auto discarded = w.afterStatement('I', "ROLLBACK", 3200);
  ASSERT_TRUE(discarded.ended);
  EXPECT_EQ(*discarded.ended, session::TxnEnd::kRolledBack);
  EXPECT_EQ(discarded.notice->code, "TRANSACTION_DISCARDED");
  // After pgwarden's rollback the next denial tells it, once.
  ASSERT_TRUE(w.afterStatement('T', "BEGIN", 4000).moved);
  ASSERT_TRUE(w.move(session::TxnEvent::kExpired, 70000));
  EXPECT_FALSE(w.afterDenial("TRANSACTION_ROLLED_BACK", 70001));
  EXPECT_EQ(w.state(), session::TxnState::kNone);
}

// A DataRow body of the counters query: a table and its changed rows so far.
std::string counterRow(std::string_view table, int64_t rows) {
  std::string out;
  const std::string n = std::to_string(rows);
  protocol::writeDataRow(out, {table, std::string_view(n)});
  return out.substr(5);
}

TEST_F(WriteTxnTest, RowsOfEveryTableTheWriteChangedCount) {
  session::WriteTransaction w = openWith("parent", 1000);
  const std::string parent = "parent";
  // The counters before: the transaction's earlier changes (and counts not yet flushed), after
  // the row that says the target can change other tables.
  w.beginWrite(parent);
  w.noteCounterRow(counterRow("", 0));
  w.noteCounterRow(counterRow("items", 3));
  w.noteCounterRow(counterRow("child", 7));
  // DELETE 1 of parent, and ON DELETE CASCADE removed 100 rows of child.
  auto tag = w.onCommandComplete(nullptr, "DELETE 1",
                                 session::WriteTransaction::Wrapped{parent, "DELETE"});
  ASSERT_TRUE(tag.measure && !tag.over);
  w.noteCounterRow(counterRow("child", 107));
  w.noteCounterRow(counterRow("items", 3));
  w.noteCounterRow(counterRow("parent", 1));
  auto over = w.onCounted();
  ASSERT_TRUE(over.over);
  EXPECT_EQ(over.rows, 101);
  EXPECT_FALSE(over.counted);
  const std::string detail = over.over->facts.json(over.over->code);
  EXPECT_NE(detail.find("\"rows\":101"), std::string::npos) << detail;
  EXPECT_NE(detail.find("\"tables\":[\"child: 100 rows\",\"parent: 1 row\"]"), std::string::npos)
      << detail;
  EXPECT_NE(
      over.over->message.find("101 rows in 2 tables (child: 100 rows; parent: 1 row; the command "
                              "tag counts 1 row of parent)"),
      std::string::npos)
      << over.over->message;
  EXPECT_EQ(w.totals().rows, 0);  // undone
  // Within the cap: each table's rows go to the tallies.
  w.beginWrite(parent);
  w.noteCounterRow(counterRow("", 0));
  w.noteCounterRow(counterRow("child", 107));
  w.noteCounterRow(counterRow("parent", 1));
  ASSERT_TRUE(
      w.onCommandComplete(nullptr, "DELETE 1", session::WriteTransaction::Wrapped{parent, "DELETE"})
          .measure);
  w.noteCounterRow(counterRow("child", 112));
  w.noteCounterRow(counterRow("parent", 2));
  auto kept = w.onCounted();
  EXPECT_TRUE(kept.counted && !kept.over);
  EXPECT_EQ(kept.rows, 6);
  EXPECT_EQ(w.totals().summary, "child: 5 rows; parent: 1 row");
  // A malformed row is ignored, never a crash.
  w.noteCounterRow("\x00");
  EXPECT_EQ(w.totals().rows, 6);
  // Counters that saw less than the tag (track_counts off): the tag's count stands.
  w.beginWrite(parent);
  w.noteCounterRow(counterRow("", 0));
  ASSERT_TRUE(
      w.onCommandComplete(nullptr, "DELETE 2", session::WriteTransaction::Wrapped{parent, "DELETE"})
          .measure);
  w.noteCounterRow(counterRow("", 0));
  auto by_tag = w.onCounted();
  EXPECT_TRUE(by_tag.counted);
  EXPECT_EQ(by_tag.rows, 2);
  EXPECT_EQ(w.totals().summary, "child: 5 rows; parent: 3 rows");
  // A plain table (no first row): no second read, the tag counts at once.
  w.beginWrite(parent);
  auto plain = w.onCommandComplete(nullptr, "DELETE 1",
                                   session::WriteTransaction::Wrapped{parent, "DELETE"});
  EXPECT_TRUE(plain.counted && !plain.measure);
  EXPECT_EQ(w.totals().rows, 9);
}

TEST_F(WriteTxnTest, TheCountersQueryNamesTheTargetAsALiteral) {
  session::WriteTransaction w(group_->writes());
  w.beginWrite("\"it's\".t\\x");
  const std::string q = w.countersQuery();
  EXPECT_NE(q.find("pg_catalog.to_regclass(E'\"it''s\".t\\\\x')"), std::string::npos) << q;
  EXPECT_EQ(q.rfind("SELECT '', 0 WHERE ", 0), 0u) << q;
  EXPECT_NE(q.find("pg_catalog.pg_stat_get_xact_tuples_deleted"), std::string::npos) << q;
  EXPECT_NE(q.find("pg_catalog.pg_partition_tree("), std::string::npos) << q;
}

TEST_F(WriteTxnTest, TalliesFollowTheClientsSavepoints) {
  session::WriteTransaction w = openWith("items", 1000);
  const std::string items = "items";
  auto run = [&](const std::string& sql, std::string_view tag) {
    auto a = analysis::analyzeUncached(sql);
    const analysis::StatementInfo& st = a->statements.at(0);
    if (st.kind != analysis::StatementKind::kUpdate) {
      (void)w.onCommandComplete(&st, tag, std::nullopt);
      return;
    }
    ASSERT_TRUE(
        w.onCommandComplete(&st, tag, session::WriteTransaction::Wrapped{items, "UPDATE"}).counted);
  };
  run("UPDATE items SET q = 1 WHERE id < 5", "UPDATE 4");
  run("SAVEPOINT a", "SAVEPOINT");
  run("UPDATE items SET q = 2 WHERE id < 15", "UPDATE 10");
  run("SAVEPOINT b", "SAVEPOINT");
  run("UPDATE items SET q = 3 WHERE id = 15", "UPDATE 1");
  run("RELEASE SAVEPOINT b", "RELEASE");  // b's write now belongs to a
  EXPECT_EQ(w.totals().rows, 15);
  run("ROLLBACK TO SAVEPOINT a", "ROLLBACK");
  EXPECT_EQ(w.totals().rows, 4);
  EXPECT_EQ(w.totals().writes, 1);
  EXPECT_EQ(w.totals().summary, "items: 4 rows");
  EXPECT_NE(w.openNotice(2000).detail.find("\"statements\":[\"UPDATE items 4\"]"),
            std::string::npos);
  // a is still set after ROLLBACK TO: a second rollback goes back to the same point.
  run("UPDATE items SET q = 2 WHERE id < 8", "UPDATE 7");
  run("ROLLBACK TO a", "ROLLBACK");
  EXPECT_EQ(w.totals().rows, 4);
  // Names are reused: ROLLBACK TO names the newest one.
  run("SAVEPOINT a", "SAVEPOINT");
  run("UPDATE items SET q = 2 WHERE id < 3", "UPDATE 2");
  run("ROLLBACK TO SAVEPOINT a", "ROLLBACK");
  EXPECT_EQ(w.totals().rows, 4);
  // A savepoint never set (or forgotten past the bound) leaves the tallies as they are.
  run("ROLLBACK TO SAVEPOINT zzz", "ROLLBACK");
  EXPECT_EQ(w.totals().rows, 4);
  // Past the bound the oldest marks are forgotten: their rollback over-counts, never under.
  for (int i = 0; i < 40; ++i) run("SAVEPOINT s" + std::to_string(i), "SAVEPOINT");
  run("UPDATE items SET q = 2 WHERE id < 3", "UPDATE 2");
  run("ROLLBACK TO SAVEPOINT s0", "ROLLBACK");
  EXPECT_EQ(w.totals().rows, 6);
  run("ROLLBACK TO SAVEPOINT s39", "ROLLBACK");
  EXPECT_EQ(w.totals().rows, 4);
  w.clear();  // the transaction ended: no savepoint survives it
  run("ROLLBACK TO SAVEPOINT a", "ROLLBACK");
  EXPECT_EQ(w.totals().rows, 0);
}

// The gate asks the caller's WriteTransaction before the chain; a front end without one (MCP) gets
// the write group's read checks instead, since its chain has no read_only guard.
class WriteCaller : public test::FakeCaller {
 public:
  WriteCaller(const guards::PolicyGroup* g, const session::WriteTransaction* w)
      : FakeCaller(g), w_(w) {}
  const session::WriteTransaction* writeTransaction() const override { return w_; }

 private:
  const session::WriteTransaction* w_;
};

TEST_F(WriteTxnTest, TheGateJudgesWritesBeforeTheChain) {
  session::PolicyEngine engine(64, 4096);
  session::GateServices services;
  services.policy = &engine;
  session::WriteTransaction w = openWith("items");
  WriteCaller caller(group_, &w);
  session::StatementGate gate(services, caller, [](session::GateVerdict) {});
  session::GateRequest r;
  r.sql = "UPDATE items SET qty = 1 WHERE id = 1";
  session::GateVerdict v;
  ASSERT_TRUE(gate.decide(session::GateRequest(r), v));
  EXPECT_FALSE(v.plan->decision.denied);
  EXPECT_TRUE(v.write.wrap);
  EXPECT_EQ(v.write.table, "items");
  r.sql = "UPDATE items SET qty = 1";
  ASSERT_TRUE(gate.decide(session::GateRequest(r), v));
  ASSERT_TRUE(v.plan->decision.denied);
  EXPECT_EQ(v.plan->decision.deny.code, "MISSING_PREDICATE");
  EXPECT_EQ(v.plan->decision.deny.guard, "guarded_writes");
  EXPECT_FALSE(v.write.wrap);

  WriteCaller mcp(group_, nullptr);
  session::StatementGate read_gate(services, mcp, [](session::GateVerdict) {});
  r.sql = "BEGIN READ WRITE";
  ASSERT_TRUE(read_gate.decide(session::GateRequest(r), v));
  EXPECT_EQ(v.plan->decision.deny.code, "READ_ONLY");
  r.sql = "SET default_transaction_read_only = off";
  ASSERT_TRUE(read_gate.decide(session::GateRequest(r), v));
  EXPECT_EQ(v.plan->decision.deny.code, "PROTECTED_SETTING");
  r.sql = "SELECT * FROM items WHERE id = 1";
  ASSERT_TRUE(read_gate.decide(session::GateRequest(r), v));
  EXPECT_FALSE(v.plan->decision.denied);
}

TEST_F(WriteTxnTest, EveryWriteEscapeOfTheCorpusIsDenied) {
  const auto lines = guards::test::loadCorpus("tests/security/write_escapes.tsv");
  ASSERT_GE(lines.size(), 50u);
  for (const auto& l : lines) {
    SCOPED_TRACE("write_escapes.tsv:" + std::to_string(l.number) + " [" + l.category + "] " + l.sql);
    session::WriteTransaction w = openWith("w_items");
    EXPECT_EQ(code(w, l.sql), l.expect);
  }
}

}  // namespace
}  // namespace pgwarden::daemon
