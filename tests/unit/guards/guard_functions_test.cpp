// guards: the functions guard: bounded sleeps and series, the built-in deny list, operators' own
// lists, set_config() of protected settings.
#include "guards/codes.h"
#include "guards/guard.h"
#include "tests/unit/guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

using test::contains;
using test::evaluate;
using test::group;

TEST(Functions, SleepIsBounded) {
  const auto g = group("    - kind: functions\n      max_sleep_seconds: 2\n");
  EXPECT_FALSE(evaluate(*g, "SELECT pg_sleep(1.5)", nullptr).denied);
  EXPECT_FALSE(evaluate(*g, "SELECT pg_sleep_for('500 ms')", nullptr).denied);
  EXPECT_FALSE(evaluate(*g, "SELECT pg_sleep_for('00:00:02')", nullptr).denied);
  for (const char* sql : {"SELECT pg_sleep(3)", "SELECT pg_catalog.pg_sleep(10)", "SELECT pg_sleep_for('1 minute')",
                          "SELECT pg_sleep_for('00:00:05')", "SELECT pg_sleep_until(now())",
                          "SELECT pg_sleep(x) FROM t", "SELECT PG_SLEEP(100)", "SELECT pg_sleep('7')"}) {
    SCOPED_TRACE(sql);
    const Decision d = evaluate(*g, sql, nullptr);
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, "FUNCTION_LIMIT");
    EXPECT_EQ(d.deny.sqlstate, "54000");
    EXPECT_TRUE(contains(d.deny.message, "2 seconds")) << d.deny.message;
  }
  const Decision d = evaluate(*g, "SELECT pg_sleep(30)", nullptr);
  EXPECT_TRUE(contains(d.deny.message, "30 seconds")) << d.deny.message;
  EXPECT_EQ(d.deny.hint, "SELECT pg_sleep(2)");
}

TEST(Functions, ASleepThatMayRunPerRowIsRefused) {
  const auto g = group("    - kind: functions\n      max_sleep_seconds: 2\n");
  EXPECT_FALSE(evaluate(*g, "SELECT pg_sleep(1), now()", nullptr).denied);
  for (const char* sql : {"SELECT pg_sleep(1) FROM generate_series(1, 1000)", "SELECT pg_sleep(0.1) FROM t",
                          "SELECT pg_sleep(1), unnest(ARRAY[1, 2, 3])",
                          "SELECT * FROM t WHERE a = 1 AND pg_sleep(1) IS NOT NULL"}) {
    SCOPED_TRACE(sql);
    const Decision d = evaluate(*g, sql, nullptr);
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, "FUNCTION_LIMIT");
    EXPECT_TRUE(contains(d.deny.message, "once per row")) << d.deny.message;
  }
}

TEST(Functions, JoinedSeriesAreBoundedTogether) {
  const auto g = group("    - kind: functions\n      max_series_rows: 1000000\n");
  EXPECT_FALSE(evaluate(*g, "SELECT count(*) FROM generate_series(1, 1000) a, generate_series(1, 1000) b", nullptr).denied);
  const Decision d =
      evaluate(*g, "SELECT count(*) FROM generate_series(1, 1000000) a, generate_series(1, 1000000) b", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "FUNCTION_LIMIT");
  EXPECT_TRUE(contains(d.deny.message, "together would produce about 1,000,000,000,000 rows")) << d.deny.message;
}

TEST(Functions, NoSleepAtAllWhenTheBoundIsZero) {
  const auto g = group("    - kind: functions\n      max_sleep_seconds: 0\n");
  const Decision d = evaluate(*g, "SELECT pg_sleep(0.01)", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "FUNCTION_LIMIT");
}

TEST(Functions, GenerateSeriesIsBounded) {
  const auto g = group("    - kind: functions\n      max_series_rows: 1000000\n");
  for (const char* ok : {"SELECT * FROM generate_series(1, 1000)", "SELECT * FROM generate_series(1, 1000000)",
                         "SELECT * FROM generate_series(1, 1e9, 1000)",
                         "SELECT * FROM generate_series('2024-01-01'::date, '2024-12-31', '1 day')",
                         "SELECT * FROM generate_series(1, (SELECT max(id) FROM t))",
                         "SELECT * FROM generate_series(10, 1)"}) {
    EXPECT_FALSE(evaluate(*g, ok, nullptr).denied) << ok;
  }
  for (const char* bad : {"SELECT * FROM generate_series(1, 1000001)", "SELECT count(*) FROM generate_series(-5e9, 5e9)",
                          "SELECT * FROM generate_series(1, 1e12::bigint, 2)",
                          "SELECT * FROM generate_series('2000-01-01 00:00'::timestamp, '2001-01-01', '1 second')",
                          "SELECT * FROM generate_series('2000-01-01'::timestamp, '2001-01-01', interval '10 seconds')"}) {
    SCOPED_TRACE(bad);
    const Decision d = evaluate(*g, bad, nullptr);
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, "FUNCTION_LIMIT");
    EXPECT_TRUE(contains(d.deny.message, "1,000,000 allowed")) << d.deny.message;
  }
}

TEST(Functions, DefaultDenyListCoversEachCategory) {
  const auto g = group("    - kind: functions\n");
  struct Call {
    const char* sql;
    const char* category;
  };
  for (const Call& c : {Call{"SELECT pg_read_file('x')", "file_access"},
                        Call{"SELECT pg_ls_waldir()", "file_access"},
                        Call{"SELECT lo_unlink(1)", "large_object"},
                        Call{"SELECT loread(0, 1)", "large_object"},
                        Call{"SELECT dblink_exec('x', 'y')", "remote_connection"},
                        Call{"SELECT pg_terminate_backend(1)", "server_control"},
                        Call{"SELECT pg_drop_replication_slot('s')", "server_control"},
                        Call{"SELECT pg_stat_reset()", "server_control"},
                        Call{"SELECT pg_advisory_xact_lock_shared(1)", "advisory_lock"},
                        Call{"SELECT pg_notify('c', 'p')", "notification"},
                        Call{"SELECT setval('s', 5)", "sequence"},
                        Call{"SELECT txid_current()", "transaction_id"},
                        Call{"SELECT pg_current_xact_id()", "transaction_id"},
                        Call{"SELECT cursor_to_xml('c', 1, true, true, '')", "sql_as_text"},
                        Call{"SELECT database_to_xml(true, true, '')", "sql_as_text"},
                        Call{"SELECT inet_server_addr()", "server_address"}}) {
    SCOPED_TRACE(c.sql);
    const Decision d = evaluate(*g, c.sql, nullptr);
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, "FUNCTION_DENIED");
    EXPECT_TRUE(contains(d.deny.detail, std::string("\"category\":\"") + c.category + "\"")) << d.deny.detail;
  }
}

TEST(Functions, TsRewriteRefusedOnlyInTheFormThatRunsSql) {
  const auto g = group("    - kind: functions\n");
  const Decision two = evaluate(*g, "SELECT ts_rewrite('a & b'::tsquery, 'SELECT t, s FROM aliases')", nullptr);
  ASSERT_TRUE(two.denied);
  EXPECT_TRUE(contains(two.deny.detail, "\"category\":\"sql_as_text\"")) << two.deny.detail;
  EXPECT_FALSE(evaluate(*g, "SELECT ts_rewrite('a & b'::tsquery, 'a'::tsquery, 'c'::tsquery)", nullptr).denied);
  EXPECT_FALSE(evaluate(*g, "SELECT ts_rewrite(q, t, s) FROM aliases", nullptr).denied);
}

TEST(Functions, MatchedWhateverTheSpelling) {
  const auto g = group("    - kind: functions\n");
  for (const char* sql : {"SELECT pg_read_file('x')", "SELECT PG_READ_FILE('x')", "SELECT \"pg_read_file\"('x')",
                          "SELECT pg_catalog.pg_read_file('x')", "SELECT \"pg_catalog\".\"pg_read_file\"('x')",
                          "SELECT U&\"pg_read\\005ffile\"('x')", "SELECT other.pg_read_file('x')",
                          "SELECT * FROM t WHERE a = (SELECT length(pg_read_file('x')))",
                          "SELECT * FROM pg_read_file('x') AS f"}) {
    SCOPED_TRACE(sql);
    const Decision d = evaluate(*g, sql, nullptr);
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, "FUNCTION_DENIED");
  }
}

TEST(Functions, AllowListMode) {
  const auto g = group("    - kind: functions\n      mode: allow\n      allow: [count, lower, \"pg_catalog.now\"]\n");
  EXPECT_FALSE(evaluate(*g, "SELECT count(*), lower('A'), now() FROM t", nullptr).denied);
  const Decision d = evaluate(*g, "SELECT upper('a')", nullptr);
  ASSERT_TRUE(d.denied);
  EXPECT_EQ(d.deny.code, "FUNCTION_DENIED");
  EXPECT_TRUE(contains(d.deny.detail, "\"allowed\":[\"count\",\"lower\",\"pg_catalog.now\"]")) << d.deny.detail;
  EXPECT_TRUE(evaluate(*g, "SELECT myschema.now()", nullptr).denied);
}

TEST(Functions, OperatorDenyAndAllowExceptions) {
  const auto g = group("    - kind: functions\n      deny: [md5, \"public.secret_*\"]\n      allow: [pg_ls_dir]\n",
                       "  search_path: [public]\n");
  EXPECT_TRUE(evaluate(*g, "SELECT md5('x')", nullptr).denied);
  EXPECT_TRUE(evaluate(*g, "SELECT public.secret_key()", nullptr).denied);
  EXPECT_TRUE(evaluate(*g, "SELECT secret_key()", nullptr).denied);
  EXPECT_FALSE(evaluate(*g, "SELECT other.secret_key()", nullptr).denied);
  EXPECT_FALSE(evaluate(*g, "SELECT pg_ls_dir('.')", nullptr).denied);
  EXPECT_TRUE(evaluate(*g, "SELECT pg_read_file('x')", nullptr).denied);
}

TEST(Functions, BuiltinListCanBeDropped) {
  const auto g = group("    - kind: functions\n      builtin_deny: false\n");
  EXPECT_FALSE(evaluate(*g, "SELECT pg_read_file('x')", nullptr).denied);
  EXPECT_TRUE(evaluate(*g, "SELECT pg_sleep(100)", nullptr).denied);  // bounds stay
}

TEST(Functions, SetConfigOfProtectedSettings) {
  const auto g = group("    - kind: functions\n");
  EXPECT_FALSE(evaluate(*g, "SELECT set_config('work_mem', '1MB', false)", nullptr).denied);
  for (const char* sql : {"SELECT set_config('statement_timeout', '0', false)", "SELECT set_config('ROLE', 'x', false)",
                          "SELECT set_config(n, 'x', false) FROM t"}) {
    const Decision d = evaluate(*g, sql, nullptr);
    ASSERT_TRUE(d.denied) << sql;
    EXPECT_EQ(d.deny.code, "PROTECTED_SETTING");
    EXPECT_EQ(d.deny.guard, contains(sql, "set_config(n,") ? "fixed_settings" : "functions");
  }
}

}  // namespace
}  // namespace pgwarden::guards
