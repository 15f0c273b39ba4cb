// guards: the chain (order, first deny, warnings, every statement), operator reasons, warn-only
// guards, each built-in guard's decisions and reasons, and the `groups:` config parser.
#include "common/config_util.h"
#include "guards/codes.h"
#include "guards/guard.h"
#include "tests/unit/guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

using test::contains;
using test::evaluate;
using test::group;

// ---- read_only ----

const auto& readOnly() {
  static const auto g = group("    - kind: read_only\n", "  search_path: [public]\n");
  return *g;
}

class ReadOnlyAllows : public ::testing::TestWithParam<const char*> {};
TEST_P(ReadOnlyAllows, Passes) {
  const Decision d = evaluate(readOnly(), GetParam(), nullptr);
  EXPECT_FALSE(d.denied) << d.deny.message;
  EXPECT_TRUE(d.actions.empty());
}
INSTANTIATE_TEST_SUITE_P(
    Reads, ReadOnlyAllows,
    ::testing::Values("SELECT 1", "SELECT * FROM t WHERE a = 1", "SHOW search_path", "EXPLAIN SELECT 1",
                      "EXPLAIN DELETE FROM t", "EXPLAIN ANALYZE SELECT 1", "BEGIN", "BEGIN READ ONLY",
                      "BEGIN ISOLATION LEVEL SERIALIZABLE", "COMMIT", "ROLLBACK", "SAVEPOINT a",
                      "SET work_mem = '64MB'", "SET application_name = 'x'", "RESET work_mem",
                      "PREPARE p AS SELECT 1", "EXECUTE p", "DEALLOCATE p", "DECLARE c CURSOR FOR SELECT 1",
                      "FETCH 10 FROM c", "CLOSE c", "COPY t TO STDOUT", "COPY (SELECT 1) TO STDOUT",
                      "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "VALUES (1)",
                      "SELECT current_setting('statement_timeout')", "SELECT set_config('work_mem', '1MB', false)",
                      // Nothing that can change data or escape the policy: EXPLAIN plans without
                      // running, read-only on is the connection's own default, and no role can have
                      // been set while role and session_authorization are protected.
                      "EXPLAIN SELECT * FROM t WHERE a = 1 FOR UPDATE",
                      "EXPLAIN WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
                      "SET default_transaction_read_only = on", "SET default_transaction_read_only TO true",
                      "RESET default_transaction_read_only", "SET default_transaction_read_only TO DEFAULT",
                      "RESET ROLE", "SET ROLE NONE", "RESET SESSION AUTHORIZATION",
                      "SET SESSION AUTHORIZATION DEFAULT"));

struct Denial {
  const char* sql;
  const char* code;
  const char* mentions;  // the reason names what was wrong
};
std::ostream& operator<<(std::ostream& os, const Denial& d) { return os << d.sql; }

class ReadOnlyDenies : public ::testing::TestWithParam<Denial> {};
TEST_P(ReadOnlyDenies, WithAReasonNamingTheStatement) {
  const Denial& c = GetParam();
  const Decision d = evaluate(readOnly(), c.sql, nullptr);
  ASSERT_TRUE(d.denied);
  // set_config() with a name that is not a constant is refused in every group, before the chain
  // (guards/fixed_settings.h): it could name standard_conforming_strings.
  EXPECT_EQ(d.deny.guard, contains(c.mentions, "not a constant") ? "fixed_settings" : "read_only");
  EXPECT_EQ(d.deny.code, c.code);
  EXPECT_EQ(d.deny.sqlstate, "42501");
  EXPECT_TRUE(contains(d.deny.message, c.mentions)) << d.deny.message;
  EXPECT_TRUE(contains(d.deny.detail, "\"next_step\":")) << d.deny.detail;
}
INSTANTIATE_TEST_SUITE_P(
    Writes, ReadOnlyDenies,
    ::testing::Values(
        Denial{"INSERT INTO t VALUES (1)", "READ_ONLY", "INSERT"},
        Denial{"UPDATE t SET a = 1", "READ_ONLY", "UPDATE"},
        Denial{"DELETE FROM t", "READ_ONLY", "DELETE"},
        Denial{"MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "READ_ONLY", "MERGE"},
        Denial{"TRUNCATE t", "READ_ONLY", "TRUNCATE"},
        Denial{"CREATE TABLE x (a int)", "READ_ONLY", "CREATE TABLE"},
        Denial{"CREATE TEMP TABLE x (a int)", "READ_ONLY", "CREATE TABLE"},
        Denial{"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'select 1'", "READ_ONLY", "CREATE FUNCTION"},
        Denial{"DROP TABLE t", "READ_ONLY", "DROP"},
        Denial{"WITH d AS (DELETE FROM t RETURNING 1) SELECT * FROM d", "READ_ONLY", "WITH"},
        Denial{"SELECT * INTO x FROM t", "READ_ONLY", "SELECT INTO"},
        Denial{"SELECT * FROM t FOR UPDATE", "READ_ONLY", "FOR UPDATE"},
        Denial{"EXPLAIN ANALYZE DELETE FROM t", "READ_ONLY", "EXPLAIN ANALYZE"},
        Denial{"PREPARE p AS DELETE FROM t", "READ_ONLY", "PREPARE"},
        Denial{"DO $$ BEGIN END $$", "READ_ONLY", "DO"},
        Denial{"CALL p()", "READ_ONLY", "CALL"},
        Denial{"COPY t FROM STDIN", "READ_ONLY", "COPY ... FROM"},
        Denial{"COPY t TO '/tmp/x'", "READ_ONLY", "file or program"},
        Denial{"COPY (SELECT 1) TO PROGRAM 'id'", "READ_ONLY", "file or program"},
        Denial{"COPY (DELETE FROM t RETURNING *) TO STDOUT", "READ_ONLY", "COPY"},
        Denial{"LISTEN ch", "READ_ONLY", "LISTEN"},
        Denial{"NOTIFY ch", "READ_ONLY", "NOTIFY"},
        Denial{"VACUUM t", "READ_ONLY", "VACUUM"},
        Denial{"ANALYZE t", "READ_ONLY", "ANALYZE"},
        Denial{"CLUSTER t", "READ_ONLY", "CLUSTER"},
        Denial{"REINDEX TABLE t", "READ_ONLY", "REINDEX"},
        Denial{"LOCK TABLE t", "READ_ONLY", "LOCK TABLE"},
        Denial{"ALTER SYSTEM SET work_mem = '1GB'", "READ_ONLY", "ALTER SYSTEM"},
        Denial{"LOAD 'x'", "READ_ONLY", "LOAD"},
        Denial{"DISCARD ALL", "READ_ONLY", "DISCARD"},
        Denial{"DECLARE c CURSOR WITH HOLD FOR SELECT 1", "READ_ONLY", "WITH HOLD"},
        Denial{"BEGIN READ WRITE", "READ_ONLY", "READ WRITE"},
        Denial{"START TRANSACTION READ WRITE", "READ_ONLY", "READ WRITE"},
        Denial{"SET TRANSACTION READ WRITE", "READ_ONLY", "READ WRITE"},
        Denial{"SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "READ_ONLY", "READ WRITE"},
        Denial{"PREPARE TRANSACTION 'x'", "READ_ONLY", "two-phase"},
        Denial{"SET statement_timeout = 0", "PROTECTED_SETTING", "statement_timeout"},
        Denial{"SET lock_timeout = 0", "PROTECTED_SETTING", "lock_timeout"},
        Denial{"SET idle_in_transaction_session_timeout = 0", "PROTECTED_SETTING", "idle_in_transaction"},
        Denial{"SET default_transaction_read_only = off", "PROTECTED_SETTING", "default_transaction_read_only"},
        Denial{"SET transaction_read_only = off", "PROTECTED_SETTING", "transaction_read_only"},
        Denial{"SET ROLE postgres", "PROTECTED_SETTING", "role"},
        Denial{"SET SESSION AUTHORIZATION postgres", "PROTECTED_SETTING", "session_authorization"},
        Denial{"EXPLAIN ANALYZE SELECT * FROM t FOR UPDATE", "READ_ONLY", "FOR UPDATE"},
        Denial{"EXPLAIN ANALYZE WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "READ_ONLY", "WITH"},
        Denial{"SET default_transaction_read_only = 0", "PROTECTED_SETTING", "default_transaction_read_only"},
        Denial{"RESET statement_timeout", "PROTECTED_SETTING", "statement_timeout"},
        Denial{"RESET ALL", "PROTECTED_SETTING", "RESET ALL"},
        Denial{"SET search_path = evil", "PROTECTED_SETTING", "search_path"},
        Denial{"SELECT set_config('statement_timeout', '0', false)", "PROTECTED_SETTING", "statement_timeout"},
        Denial{"SELECT set_config(x, '0', false) FROM t", "PROTECTED_SETTING", "not a constant"}));

TEST(ReadOnly, SearchPathIsProtectedOnlyWhenTheGroupFixesIt) {
  const auto free = group("    - kind: read_only\n");
  EXPECT_FALSE(evaluate(*free, "SET search_path = public, x", nullptr).denied);
  EXPECT_TRUE(evaluate(readOnly(), "SET search_path = public, x", nullptr).denied);
}

TEST(ReadOnly, OperatorCanProtectMoreSettings) {
  const auto g = group("    - kind: read_only\n      protected_settings: [work_mem]\n");
  const Decision d = evaluate(*g, "SET work_mem = '1GB'", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "PROTECTED_SETTING");
  EXPECT_FALSE(evaluate(*g, "SET application_name = 'x'", nullptr).denied);
}

TEST(ReadOnly, WriteHintIsAReadThatPasses) {
  const Decision d = evaluate(readOnly(), "DELETE FROM public.t WHERE a = 1", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.hint, "SELECT count(*) FROM public.t");
  EXPECT_FALSE(evaluate(readOnly(), d.deny.hint, nullptr).denied);
}

// ---- tables ----

TEST(Tables, DenyPatternsResolveUnqualifiedNames) {
  const auto g = group("    - kind: tables\n      deny: [\"secret.*\", \"pg_catalog.pg_authid\"]\n",
                       "  search_path: [secret, public]\n");
  for (const char* sql : {"SELECT * FROM secret.keys", "SELECT * FROM keys", "SELECT * FROM pg_authid",
                          "SELECT * FROM pg_catalog.pg_authid", "SELECT * FROM PG_AUTHID",
                          "DELETE FROM secret.keys", "SELECT * FROM public.t JOIN secret.k ON true"}) {
    SCOPED_TRACE(sql);
    const Decision d = evaluate(*g, sql, nullptr);
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, "TABLE_DENIED");
    EXPECT_EQ(d.deny.sqlstate, "42501");
  }
  EXPECT_FALSE(evaluate(*g, "SELECT * FROM public.t", nullptr).denied);
  EXPECT_FALSE(evaluate(*g, "WITH keys AS (SELECT 1) SELECT * FROM keys", nullptr).denied);
  const Decision d = evaluate(*g, "SELECT rolpassword FROM pg_authid", nullptr);
  EXPECT_TRUE(contains(d.deny.message, "pg_catalog.pg_roles")) << d.deny.message;
  EXPECT_EQ(d.deny.hint, "SELECT * FROM pg_catalog.pg_roles LIMIT 100");
}

TEST(Tables, AllowListNeedsEveryPossibleResolution) {
  const auto g = group("    - kind: tables\n      allow: [\"public.*\", \"pg_catalog.pg_class\"]\n",
                       "  search_path: [public]\n");
  EXPECT_FALSE(evaluate(*g, "SELECT * FROM t", nullptr).denied);
  EXPECT_FALSE(evaluate(*g, "SELECT * FROM pg_class", nullptr).denied);
  const Decision other = evaluate(*g, "SELECT * FROM other.t", nullptr);
  ASSERT_TRUE(other.denied);
  EXPECT_TRUE(contains(other.deny.detail, "\"allowed\":[\"public.*\",\"pg_catalog.pg_class\"]")) << other.deny.detail;
  // An unqualified pg_ name resolves to pg_catalog first.
  EXPECT_TRUE(evaluate(*g, "SELECT * FROM pg_authid", nullptr).denied);

  const auto two = group("    - kind: tables\n      allow: [\"a.*\"]\n", "  search_path: [a, b]\n");
  EXPECT_TRUE(evaluate(*two, "SELECT * FROM t", nullptr).denied);  // could be b.t
  EXPECT_FALSE(evaluate(*two, "SELECT * FROM a.t", nullptr).denied);
}

// ---- multi_statement ----

TEST(MultiStatement, CountsStatementsAndHintsTheFirst) {
  const auto one = group("    - kind: multi_statement\n");
  EXPECT_FALSE(evaluate(*one, "SELECT 1;", nullptr).denied);
  const Decision d = evaluate(*one, "SELECT 1; SELECT 2", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "MULTI_STATEMENT");
  EXPECT_TRUE(contains(d.deny.message, "one at a time")) << d.deny.message;
  EXPECT_EQ(d.deny.hint, "SELECT 1");
  EXPECT_TRUE(contains(d.deny.detail, "\"statements\":2")) << d.deny.detail;
  const auto two = group("    - kind: multi_statement\n      max_statements: 2\n");
  EXPECT_FALSE(evaluate(*two, "SELECT 1; SELECT 2", nullptr).denied);
  EXPECT_TRUE(evaluate(*two, "SELECT 1; SELECT 2; SELECT 3", nullptr).denied);
}

// ---- require_predicate ----

TEST(RequirePredicate, NamesTableSizeColumnAndExample) {
  const auto stats = test::sampleStats();
  const auto g = group("    - kind: require_predicate\n      min_rows: 100000\n", "  search_path: [public]\n");
  const Decision d = evaluate(*g, "SELECT * FROM fct_shipments", stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "MISSING_PREDICATE");
  EXPECT_EQ(d.deny.sqlstate, "54000");
  EXPECT_TRUE(contains(d.deny.message, "public.fct_shipments")) << d.deny.message;
  EXPECT_TRUE(contains(d.deny.message, "about 1,000,000 rows")) << d.deny.message;
  EXPECT_TRUE(contains(d.deny.message, "ship_date >= current_date - 7")) << d.deny.message;
  EXPECT_EQ(d.deny.detail,
            "{\"code\":\"MISSING_PREDICATE\",\"table\":\"public.fct_shipments\",\"estimated_rows\":1000000,"
            "\"indexed_columns\":[\"ship_date\",\"id\"],\"example_predicate\":\"ship_date >= current_date - 7\","
            "\"trivial_predicate\":false,\"next_step\":\"add a WHERE condition on an indexed column such as "
            "ship_date (for example ship_date >= current_date - 7), or aggregate with GROUP BY\"}");
  EXPECT_EQ(d.deny.hint, "SELECT * FROM public.fct_shipments WHERE ship_date >= current_date - 7 LIMIT 100");
  // The hint is a query that passes, also through the whole example chain.
  EXPECT_FALSE(evaluate(*g, d.deny.hint, stats.get()).denied);
  const auto& agents = *test::exampleGroups().at("agents");
  EXPECT_FALSE(evaluate(agents, d.deny.hint, stats.get()).denied);
}

TEST(RequirePredicate, TrivialPredicateIsCalledOut) {
  const auto stats = test::sampleStats();
  const auto g = group("    - kind: require_predicate\n");
  const Decision d = evaluate(*g, "SELECT * FROM public.fct_shipments WHERE 1=1", stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_TRUE(contains(d.deny.message, "cannot filter")) << d.deny.message;
  EXPECT_TRUE(contains(d.deny.detail, "\"trivial_predicate\":true"));
}

TEST(RequirePredicate, AggregatesAndSmallTablesPass) {
  const auto stats = test::sampleStats();
  const auto g = group("    - kind: require_predicate\n");
  for (const char* sql : {"SELECT count(*) FROM fct_shipments", "SELECT status, count(*) FROM fct_shipments GROUP BY 1",
                          "SELECT DISTINCT status FROM fct_shipments", "SELECT * FROM dim_region",
                          "SELECT * FROM fct_shipments WHERE ship_date = '2024-01-01'",
                          "SELECT * FROM fct_shipments WHERE status = 'DELAYED'",
                          "EXPLAIN SELECT * FROM fct_shipments", "SELECT * FROM other_schema.fct_shipments"}) {
    EXPECT_FALSE(evaluate(*g, sql, stats.get()).denied) << sql;
  }
}

TEST(RequirePredicate, ThresholdListedTablesAndMissingStats) {
  const auto stats = test::sampleStats();
  const auto high = group("    - kind: require_predicate\n      min_rows: 2000000\n");
  EXPECT_FALSE(evaluate(*high, "SELECT * FROM fct_shipments", stats.get()).denied);
  const auto listed = group("    - kind: require_predicate\n      min_rows: 0\n      tables: [\"public.events\"]\n");
  EXPECT_FALSE(evaluate(*listed, "SELECT * FROM fct_shipments", stats.get()).denied);
  const Decision d = evaluate(*listed, "SELECT * FROM events", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_TRUE(contains(d.deny.message, "public.events is a large table")) << d.deny.message;
  EXPECT_EQ(d.deny.hint, "SELECT count(*) FROM public.events");
  EXPECT_FALSE(evaluate(*listed, d.deny.hint, nullptr).denied);
  // No snapshot yet: only listed tables are known to be big.
  const auto plain = group("    - kind: require_predicate\n");
  EXPECT_FALSE(evaluate(*plain, "SELECT * FROM fct_shipments", nullptr).denied);
}

TEST(RequirePredicate, TableWithoutIndexGetsAGenericAdvice) {
  const auto stats = analysis::TableStatsSnapshot::fromRows({{"public", "logs", "5000000", ""}});
  const auto g = group("    - kind: require_predicate\n");
  const Decision d = evaluate(*g, "SELECT * FROM logs", stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_TRUE(contains(d.deny.message, "about 5,000,000 rows")) << d.deny.message;
  EXPECT_TRUE(contains(d.deny.message, "narrows the rows")) << d.deny.message;
  EXPECT_FALSE(evaluate(*g, d.deny.hint, stats.get()).denied);
}

TEST(RequirePredicate, CursorsPreparedStatementsAndCopyAreReads) {
  const auto stats = test::sampleStats();
  const auto g = group("    - kind: require_predicate\n");
  for (const char* sql : {"DECLARE c CURSOR FOR SELECT * FROM fct_shipments", "PREPARE p AS SELECT * FROM fct_shipments",
                          "COPY fct_shipments TO STDOUT", "COPY (SELECT * FROM fct_shipments) TO STDOUT",
                          "SELECT ARRAY(SELECT id FROM fct_shipments)"}) {
    EXPECT_TRUE(evaluate(*g, sql, stats.get()).denied) << sql;
  }
}

// ---- the chain ----

TEST(Chain, StopsAtTheFirstDenyInConfigOrder) {
  const auto fr = group("    - kind: functions\n    - kind: read_only\n");
  const Decision a = evaluate(*fr, "DELETE FROM t WHERE pg_sleep(100) IS NULL", nullptr);
  ASSERT_TRUE(a.denied);
  EXPECT_EQ(a.deny.code, "FUNCTION_LIMIT");
  EXPECT_EQ(a.actions.size(), 1u);
  const auto rf = group("    - kind: read_only\n    - kind: functions\n");
  const Decision b = evaluate(*rf, "DELETE FROM t WHERE pg_sleep(100) IS NULL", nullptr);
  EXPECT_EQ(b.deny.code, "READ_ONLY");
}

TEST(Chain, EveryStatementOfTheTextIsChecked) {
  const auto g = group("    - kind: functions\n");
  const Decision d = evaluate(*g, "SELECT 1; SELECT 2; SELECT pg_read_file('x')", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "FUNCTION_DENIED");
}

TEST(Chain, WarnOnlyGuardsWarnAndTheChainGoesOn) {
  const auto stats = test::sampleStats();
  const auto g = group(
      "    - kind: require_predicate\n      action: warn\n    - kind: row_limit\n      max_rows: 10\n");
  const Decision d = evaluate(*g, "SELECT * FROM fct_shipments", stats.get());
  EXPECT_FALSE(d.denied);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0].code, "MISSING_PREDICATE");
  EXPECT_EQ(d.warnings[0].action, Action::kWarn);
  EXPECT_EQ(d.warnings[0].sqlstate, "01000");
  ASSERT_EQ(d.actions.size(), 2u);
  EXPECT_EQ(d.actions[0].code, "MISSING_PREDICATE");
  EXPECT_EQ(d.actions[1].code, "ROWS_CAPPED");
  EXPECT_EQ(d.actions[1].action, Action::kRewrite);
  EXPECT_EQ(d.max_rows, 10);
}

TEST(Chain, SyntaxErrorsAreDeniedWithPosition) {
  const std::string sql = "SELECT * FORM fct_shipments";
  const auto a = analysis::analyzeUncached(sql);
  ASSERT_FALSE(a->ok);
  const Verdict v = syntaxErrorVerdict(*a, sql);
  EXPECT_EQ(v.code, "SYNTAX_ERROR");
  EXPECT_EQ(v.sqlstate, "42601");
  EXPECT_EQ(v.action, Action::kDeny);
  EXPECT_EQ(v.position, 10);
  EXPECT_TRUE(contains(v.message, "syntax error at or near \"FORM\"")) << v.message;
  EXPECT_EQ(v.detail, "{\"code\":\"SYNTAX_ERROR\",\"position\":10,\"next_step\":\"fix the SQL near position 10 and send it again\"}");
  EXPECT_TRUE(contains(v.hint, "FORM fct_shipments")) << v.hint;
  // evaluate() on a failed analysis gives the same denial.
  const auto& agents = *test::exampleGroups().at("agents");
  RequestContext ctx;
  const Decision d = agents.evaluate(*a, sql, ctx, nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "SYNTAX_ERROR");
}

TEST(Chain, EmptyTextIsAllowedWithNothingToRecord) {
  const auto& agents = *test::exampleGroups().at("agents");
  const Decision d = evaluate(agents, "  -- nothing\n", nullptr);
  EXPECT_FALSE(d.denied);
  EXPECT_TRUE(d.actions.empty());
  EXPECT_FALSE(d.rewritten_sql.has_value());
}

TEST(RequirePredicate, ExampleLiesInsideTheDataWhenBoundsAreKnown) {
  // Data that stopped in 2024: the example is the newest week the table holds, not the clock's.
  const auto stats = analysis::TableStatsSnapshot::fromRows(
      {{"public", "fct_shipments", "1000000", "ship_date,id", "date,bigint"},
       {"public", "events", "900000", "id", "bigint"}},
      {{"public", "fct_shipments", "ship_date", "date", "D", "", "", "", "", "-0.01",
        "{2023-01-01,2024-12-30}", "true", "false", "true"},
       {"public", "events", "id", "bigint", "N", "", "", "", "", "-1", "{1,900000}", "true", "true",
        "true"}});
  const auto g =
      group("    - kind: require_predicate\n      min_rows: 100000\n", "  search_path: [public]\n");
  Decision d = evaluate(*g, "SELECT * FROM fct_shipments", stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(
      d.deny.hint,
      "SELECT * FROM public.fct_shipments WHERE ship_date >= DATE '2024-12-30' - 7 LIMIT 100");
  EXPECT_TRUE(
      contains(d.deny.detail, "\"example_predicate\":\"ship_date >= DATE '2024-12-30' - 7\""))
      << d.deny.detail;
  EXPECT_FALSE(evaluate(*g, d.deny.hint, stats.get()).denied);
  d = evaluate(*g, "SELECT * FROM events", stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.hint, "SELECT * FROM public.events WHERE id = 900000 LIMIT 100");
  EXPECT_FALSE(evaluate(*g, d.deny.hint, stats.get()).denied);
}

// The literal-blind guards across the texts of one shape: `clean` says whether they all ran and
// had nothing to say; `skip` leaves them out, and a text they would have objected to is still
// caught by the guards that read literals, never by them.
TEST(Chain, LiteralBlindGuardsReportWhetherTheyHadNothingToSayAndCanBeLeftOut) {
  const auto g = group(
      "    - kind: read_only\n    - kind: tables\n      deny: [public.dim_region]\n"
      "    - kind: row_limit\n      max_rows: 10\n      max_limit: 100\n"
      "    - kind: require_predicate\n      min_rows: 1000\n",
      "  search_path: [public]\n");
  EXPECT_EQ(g->literalBlindGuards(), 3u);  // read_only, tables, require_predicate
  const auto stats = test::sampleStats();
  auto judge = [&](const std::string& sql, PolicyGroup::BlindGuards& blind) {
    const auto a = analysis::analyzeUncached(sql);
    RequestContext ctx;
    Decision d;
    g->evaluate(*a, sql, ctx, stats.get(), d, blind);
    return d;
  };
  PolicyGroup::BlindGuards quiet;
  const Decision capped = judge("SELECT id FROM fct_shipments WHERE id > 5", quiet);
  EXPECT_TRUE(quiet.clean);
  EXPECT_EQ(capped.max_rows, 10);
  for (const char* sql : {"SELECT * FROM dim_region WHERE region = 'EU'",  // tables denies
                          "SELECT id FROM fct_shipments",                  // require_predicate
                          "SELECT id FROM fct_shipments WHERE id > 5 LIMIT 500"}) {  // row_limit first
    SCOPED_TRACE(sql);
    PolicyGroup::BlindGuards b;
    b.clean = true;
    EXPECT_TRUE(judge(sql, b).denied);
    EXPECT_FALSE(b.clean);
  }
  // Left out: the decision of a text they have nothing to say about is the whole chain's, and
  // row_limit still refuses a LIMIT over its maximum.
  for (const char* sql : {"SELECT id FROM fct_shipments WHERE id > 7",
                          "SELECT id FROM fct_shipments WHERE id > 7 LIMIT 500"}) {
    SCOPED_TRACE(sql);
    PolicyGroup::BlindGuards skip;
    skip.skip = true;
    const Decision part = judge(sql, skip);
    const Decision whole = test::evaluate(*g, sql, stats.get());
    EXPECT_EQ(part.denied, whole.denied);
    EXPECT_EQ(part.deny.code, whole.deny.code);
    EXPECT_EQ(part.deny.message, whole.deny.message);
    EXPECT_EQ(part.max_rows, whole.max_rows);
    EXPECT_EQ(part.rewritten_sql, whole.rewritten_sql);
    EXPECT_EQ(part.actions.size(), whole.actions.size());
  }
}

// ---- operator-written reasons ----

TEST(Reasons, OverrideTheMessageWithFacts) {
  const auto stats = test::sampleStats();
  const auto g = group("    - kind: require_predicate\n",
                       "  reasons:\n"
                       "    MISSING_PREDICATE: \"{table} has about 5M rows; filter on ship_date; status holds "
                       "DELIVERED, DELAYED, RETURNED (try {example_predicate})\"\n");
  const Decision d = evaluate(*g, "SELECT * FROM fct_shipments", stats.get());
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.message,
            "public.fct_shipments has about 5M rows; filter on ship_date; status holds DELIVERED, DELAYED, "
            "RETURNED (try ship_date >= current_date - 7)");
  // The facts stay as they were: tools read the detail, people and models read the message.
  EXPECT_TRUE(contains(d.deny.detail, "\"estimated_rows\":1000000"));
}

TEST(Reasons, PerTableWithDefault) {
  const auto stats = analysis::TableStatsSnapshot::fromRows(
      {{"public", "fct_shipments", "1000000", "ship_date", "date"},
       {"public", "events", "900000", "", ""}});
  const auto g = group("    - kind: require_predicate\n",
                       "  reasons:\n"
                       "    MISSING_PREDICATE:\n"
                       "      public.fct_shipments: \"Filter fct_shipments on ship_date.\"\n"
                       "      \"*\": \"Filter {table} first; it has {estimated_rows} rows.\"\n");
  EXPECT_EQ(evaluate(*g, "SELECT * FROM fct_shipments", stats.get()).deny.message, "Filter fct_shipments on ship_date.");
  EXPECT_EQ(evaluate(*g, "SELECT * FROM events", stats.get()).deny.message,
            "Filter public.events first; it has 900000 rows.");
}

TEST(Reasons, TruncationNoticeCanBeRewritten) {
  const auto g = group("    - kind: row_limit\n      max_rows: 50\n",
                       "  reasons:\n    ROWS_TRUNCATED: \"Only {max_rows} rows are shown; ask for less.\"\n");
  const Decision d = evaluate(*g, "SELECT * FROM t", nullptr);
  EXPECT_EQ(d.truncation.message, "Only 50 rows are shown; ask for less.");
  EXPECT_EQ(d.truncation.code, "ROWS_TRUNCATED");
  EXPECT_TRUE(d.truncation_notice.empty());
}

TEST(Reasons, ATruncationReasonThatRendersEmptyLeavesTheGuardsOwnNotice) {
  const auto g = group("    - kind: row_limit\n      max_rows: 50\n", "  reasons:\n    ROWS_TRUNCATED: \"\"\n");
  const Decision d = evaluate(*g, "SELECT * FROM t", nullptr);
  EXPECT_TRUE(d.truncation.message.empty());
  EXPECT_NE(d.truncation_notice.find("truncated at 50 rows"), std::string::npos) << d.truncation_notice;
}

TEST(Reasons, ARewritesFactsServeOnlyAReasonForItsCode) {
  // A rewrite's detail is never sent, so the row cap's facts are kept only for a reason's placeholders.
  const auto g = group("    - kind: row_limit\n      max_rows: 50\n",
                       "  reasons:\n    ROWS_CAPPED: \"Capped at {max_rows}: {next_step}.\"\n");
  const Decision d = evaluate(*g, "SELECT * FROM t", nullptr);
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].action, Action::kRewrite);
  EXPECT_EQ(d.actions[0].message, "Capped at 50: narrow the query with WHERE, GROUP BY or ORDER BY ... LIMIT.");
  EXPECT_TRUE(d.actions[0].detail.empty());
}

// ---- the `groups:` config: the example config parses into the documented chains; every mistake
// is a ConfigError naming the line and the dotted key ----

struct Bad {
  const char* name;
  const char* yaml;
  int line;
  const char* key;
  const char* says;
};
std::ostream& operator<<(std::ostream& os, const Bad& b) { return os << b.name; }

class GroupsConfigError : public ::testing::TestWithParam<Bad> {};

TEST_P(GroupsConfigError, NamesLineAndKey) {
  const Bad& b = GetParam();
  try {
    parsePolicyGroups(YAML::Load(b.yaml));
    FAIL() << "accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_EQ(e.line(), b.line) << e.what();
    EXPECT_EQ(e.key(), b.key) << e.what();
    EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, GroupsConfigError,
    ::testing::Values(
        Bad{"UnknownKind",
            "agents:\n  guards:\n    - kind: read_only\n    - kind: read_olny\n", 4, "groups.agents.guards[1].kind",
            "unknown guard kind 'read_olny'"},
        Bad{"UnknownGuardKey",
            "agents:\n  guards:\n    - kind: row_limit\n      max_rows: 10\n      max_rowz: 5\n", 5,
            "groups.agents.guards[0].max_rowz", "unknown key 'max_rowz'"},
        Bad{"BadIntType", "agents:\n  guards:\n    - kind: row_limit\n      max_rows: lots\n", 4,
            "groups.agents.guards[0].max_rows", "expected an integer"},
        Bad{"NegativeLimit", "agents:\n  guards:\n    - kind: row_limit\n      max_limit: -5\n", 4,
            "groups.agents.guards[0].max_limit", "out of range"},
        Bad{"BadBool",
            "agents:\n  guards:\n    - kind: functions\n      builtin_deny: maybe\n", 4,
            "groups.agents.guards[0].builtin_deny", "expected true or false"},
        Bad{"BadDouble",
            "agents:\n  guards:\n    - kind: functions\n      max_sleep_seconds: [1]\n", 4,
            "groups.agents.guards[0].max_sleep_seconds", "expected a number"},
        Bad{"UnknownGroupKey", "agents:\n  search_path: [public]\n  guardz: []\n", 3, "groups.agents.guardz",
            "unknown key 'guardz'"},
        Bad{"GuardsNotAList", "agents:\n  guards:\n    kind: read_only\n", 3, "groups.agents.guards", "expected a list"},
        Bad{"GuardNotAMap", "agents:\n  guards:\n    - read_only\n", 3, "groups.agents.guards[0]", "expected a mapping"},
        Bad{"MissingKind", "agents:\n  guards:\n    - max_rows: 5\n", 3, "groups.agents.guards[0].kind", "needs a kind"},
        Bad{"BadAction", "agents:\n  guards:\n    - kind: read_only\n      action: shout\n", 4,
            "groups.agents.guards[0].action", "expected deny or warn"},
        Bad{"RowLimitWithoutLimits", "agents:\n  guards:\n    - kind: row_limit\n", 3, "groups.agents.guards[0]",
            "needs max_limit, max_rows or both"},
        Bad{"TablesWithoutLists", "agents:\n  guards:\n    - kind: tables\n", 3, "groups.agents.guards[0]",
            "needs an allow or a deny list"},
        Bad{"UnqualifiedPattern", "agents:\n  guards:\n    - kind: tables\n      deny: [pg_authid]\n", 3,
            "groups.agents.guards[0]", "must be schema-qualified"},
        Bad{"CostGateWithoutTables", "agents:\n  guards:\n    - kind: cost_gate\n      max_cost: 1000\n", 3,
            "groups.agents.guards[0]", "needs tables, seq_scan_rows or both"},
        Bad{"CostGateFailBehavior",
            "agents:\n  guards:\n    - kind: cost_gate\n      tables: [public.t]\n      fail_behavior: maybe\n", 5,
            "groups.agents.guards[0].fail_behavior", "expected deny or allow"},
        Bad{"CostGateSeqScan",
            "agents:\n  guards:\n    - kind: cost_gate\n      tables: [public.t]\n      seq_scan: sometimes\n", 5,
            "groups.agents.guards[0].seq_scan", "expected deny or allow"},
        Bad{"CostGatePlan",
            "agents:\n  guards:\n    - kind: cost_gate\n      tables: [public.t]\n      plan: some\n", 5,
            "groups.agents.guards[0].plan", "expected all or joins"},
        Bad{"CostGateThatChecksNothing",
            "agents:\n  guards:\n    - kind: cost_gate\n      seq_scan_rows: 10\n      seq_scan: allow\n", 5,
            "groups.agents.guards[0].seq_scan", "set max_cost or max_join_growth"},
        Bad{"CostGateJoinGrowth",
            "agents:\n  guards:\n    - kind: cost_gate\n      tables: [public.t]\n      max_join_growth: -1\n", 5,
            "groups.agents.guards[0].max_join_growth", "must be 0 (off) or more"},
        Bad{"FunctionsMode", "agents:\n  guards:\n    - kind: functions\n      mode: strict\n", 4,
            "groups.agents.guards[0].mode", "expected deny or allow"},
        Bad{"AllowModeNeedsList", "agents:\n  guards:\n    - kind: functions\n      mode: allow\n", 3,
            "groups.agents.guards[0].allow", "non-empty allow list"},
        Bad{"ZeroStatements", "agents:\n  guards:\n    - kind: multi_statement\n      max_statements: 0\n", 4,
            "groups.agents.guards[0].max_statements", "out of range"},
        Bad{"ReasonForAbsentGuard",
            "agents:\n  reasons:\n    MISSING_PREDICATE: x\n  guards:\n    - kind: read_only\n", 3,
            "groups.agents.reasons.MISSING_PREDICATE", "no guard of this group answers with MISSING_PREDICATE"},
        Bad{"ReasonCodeCase", "agents:\n  reasons:\n    read_only: x\n  guards:\n    - kind: read_only\n", 3,
            "groups.agents.reasons.read_only", "upper case"},
        Bad{"ReasonNotText", "agents:\n  reasons:\n    READ_ONLY: [a, b]\n  guards:\n    - kind: read_only\n", 3,
            "groups.agents.reasons.READ_ONLY", "expected a message"},
        Bad{"GroupNotAMap", "agents: [read_only]\n", 1, "groups.agents", "expected a mapping"}));

TEST(GroupsConfig, GroupsMustBeAMap) {
  EXPECT_THROW(parsePolicyGroups(YAML::Load("- agents\n")), config::ConfigError);
}

TEST(GroupsConfig, ExampleConfigParsesIntoTheDocumentedChains) {
  const auto& groups = test::exampleGroups();
  ASSERT_EQ(groups.count("agents"), 1u);
  ASSERT_EQ(groups.count("analysts"), 1u);
  const auto& agents = *groups.at("agents");
  std::vector<std::string> kinds;
  for (const auto& g : agents.guards()) kinds.emplace_back(g->kind());
  EXPECT_EQ(kinds, (std::vector<std::string>{"read_only", "multi_statement", "functions", "tables",
                                             "require_predicate", "row_limit", "cost_gate"}));
  EXPECT_EQ(agents.searchPath(), std::vector<std::string>{"public"});
  EXPECT_EQ(agents.name(), "agents");
}

TEST(GroupsConfig, EveryBuiltInGuardKindIsRegistered) {
  for (const char* kind : {"cost_gate", "functions", "multi_statement", "read_only", "require_predicate",
                           "row_limit", "tables"}) {
    EXPECT_NE(GuardRegistry::builtin().find(kind), nullptr) << kind;
  }
  EXPECT_EQ(GuardRegistry::builtin().find("no_such_kind"), nullptr);
}

TEST(GroupsConfig, AnotherRegistryAddsKinds) {
  class Always final : public Guard {
   public:
    std::string_view kind() const override { return "always_warn"; }
    std::vector<std::string_view> codes() const override { return {"*"}; }
    GuardResult checkStatement(const GuardInput&, const analysis::StatementInfo&) const override {
      GuardResult r;
      r.action = Action::kWarn;
      r.code = "CUSTOM_CODE";
      r.message = "custom";
      return r;
    }
  };
  GuardRegistry registry = GuardRegistry::builtin();
  registry.add("always_warn", [](const YAML::Node& node, const std::string& path, const GroupSettings&) {
    checkGuardKeys(node, path, {});
    return std::unique_ptr<Guard>(new Always());
  });
  const auto groups = parsePolicyGroups(
      YAML::Load("g:\n  reasons:\n    CUSTOM_CODE: overridden\n  guards:\n    - kind: always_warn\n"), registry);
  const Decision d = test::evaluate(*groups.at("g"), "SELECT 1", nullptr);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0].message, "overridden");
  EXPECT_EQ(d.warnings[0].guard, "always_warn");
}

// ---- a decision refilled in place ----

void expectSameVerdict(const Verdict& a, const Verdict& b, const std::string& where) {
  EXPECT_EQ(a.guard, b.guard) << where;
  EXPECT_EQ(a.action, b.action) << where;
  EXPECT_EQ(a.code, b.code) << where;
  EXPECT_EQ(a.sqlstate, b.sqlstate) << where;
  EXPECT_EQ(a.message, b.message) << where;
  EXPECT_EQ(a.detail, b.detail) << where;
  EXPECT_EQ(a.hint, b.hint) << where;
  EXPECT_EQ(a.position, b.position) << where;
}

TEST(Chain, ADecisionRefilledInPlaceEqualsAFreshOne) {
  // The policy engine refills its plans' decisions: nothing of the text judged before may stay.
  const auto stats = test::sampleStats();
  const auto g = group(
      "    - kind: require_predicate\n      action: warn\n    - kind: functions\n"
      "    - kind: row_limit\n      max_rows: 10\n",
      "  reasons:\n    ROWS_TRUNCATED: \"\"\n");
  const char* texts[] = {
      "SELECT * FROM fct_shipments",
      "SELECT abalance FROM pgbench_accounts WHERE aid = 48213",
      "SELECT pg_read_file('x')",
      "SELECT a FROM t WHERE a = 1 LIMIT 5",
      "SELECT * FORM t",
      "SELECT 1; SELECT * FROM fct_shipments WHERE ship_date > now() - interval '1 day'",
      "SET work_mem = '1MB'",
      "SELECT abalance FROM pgbench_accounts WHERE aid = 7"};
  Decision reused;
  for (int round = 0; round < 2; ++round) {
    for (const char* sql : texts) {
      const auto analysis = analysis::analyzeUncached(sql);
      RequestContext ctx;
      ctx.user = "agent";
      ctx.group = g->name();
      g->evaluate(*analysis, sql, ctx, stats.get(), reused);
      const Decision fresh = evaluate(*g, sql, stats.get());
      const std::string where = sql;
      EXPECT_EQ(reused.denied, fresh.denied) << where;
      expectSameVerdict(reused.deny, fresh.deny, where);
      ASSERT_EQ(reused.warnings.size(), fresh.warnings.size()) << where;
      for (size_t i = 0; i < fresh.warnings.size(); ++i)
        expectSameVerdict(reused.warnings[i], fresh.warnings[i], where);
      ASSERT_EQ(reused.actions.size(), fresh.actions.size()) << where;
      for (size_t i = 0; i < fresh.actions.size(); ++i)
        expectSameVerdict(reused.actions[i], fresh.actions[i], where);
      EXPECT_EQ(reused.rewritten_sql, fresh.rewritten_sql) << where;
      EXPECT_EQ(reused.edits.size(), fresh.edits.size()) << where;
      EXPECT_EQ(reused.max_rows, fresh.max_rows) << where;
      EXPECT_EQ(reused.truncation_notice, fresh.truncation_notice) << where;
      expectSameVerdict(reused.truncation, fresh.truncation, where);
      EXPECT_EQ(reused.explain_sql, fresh.explain_sql) << where;
      EXPECT_EQ(reused.plan_guards, fresh.plan_guards) << where;
      EXPECT_EQ(reused.estimated_rows, fresh.estimated_rows) << where;
      EXPECT_FALSE(reused.webhook) << where;
    }
  }
}

}  // namespace
}  // namespace pgwarden::guards
