// history: the PostgreSQL store against a real server made with initdb on a free port: every
// field round trip, the server stopped mid-run (records wait, submit does not block, overflow is
// counted) and restarted (records arrive), refused rows isolated, and the reports' SQL.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "history/recorder.h"
#include "history/report.h"
#include "local_server.h"
#include "report_expect.h"
#include "test_util.h"
#include "require_tool.h"

namespace pgwarden::history {
namespace {

namespace fs = std::filesystem;
using test::makeRecord;
using test::waitFor;

using ::pgwarden::test::findPgBin;
using ::pgwarden::test::freePort;

// A throwaway cluster: initdb in a temp dir, owned by the `postgres` OS user when running as root
// (initdb and postgres refuse root), listening on 127.0.0.1 on a free port.
class PostgresServer {
 public:
  bool init(const fs::path& bin) {
    bin_ = bin;
    const bool root = geteuid() == 0;
    if (root) {
      const passwd* pw = getpwnam("postgres");
      if (pw == nullptr) return false;
      ::chown(dir_.path().c_str(), pw->pw_uid, pw->pw_gid);
      as_user_ = "runuser -u postgres -- ";
    }
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
    port_ = freePort();
    return run(bin_ / "initdb", "-D " + data() + " -U postgres -A trust -E UTF8 --locale=C "
                                "--no-sync > " + log("initdb") + " 2>&1") &&
           start();
  }

  bool start() {
    return run(bin_ / "pg_ctl",
               "-D " + data() + " -l " + log("server") + " -w -t 60 -o \"-p " +
                   std::to_string(port_) + " -k " + dir_.path().string() +
                   " -c listen_addresses=127.0.0.1 -c fsync=off\" start > " + log("pg_ctl") +
                   " 2>&1");
  }

  bool stop() {
    return run(bin_ / "pg_ctl", "-D " + data() + " -m fast -w -t 60 stop > " + log("pg_ctl") +
                                    " 2>&1");
  }

  ~PostgresServer() {
    if (!bin_.empty() && fs::exists(dir_.path() / "data" / "postmaster.pid")) (void)stop();
  }

  std::string dsn() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres";
  }

  std::string serverLog() const {
    std::ifstream in(dir_.path() / "server.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string data() const { return (dir_.path() / "data").string(); }
  std::string log(const char* name) const {
    return (dir_.path() / (std::string(name) + ".log")).string();
  }
  bool run(const fs::path& exe, const std::string& args) {
    const std::string cmd = as_user_ + exe.string() + " " + args;
    return std::system(cmd.c_str()) == 0;
  }

  test::TempDir dir_;
  fs::path bin_;
  std::string as_user_;
  int port_ = 0;
};

// A libpq connection for checking what the store holds.
class Client {
 public:
  explicit Client(const std::string& dsn) : conn_(PQconnectdb(dsn.c_str())) {}
  ~Client() { PQfinish(conn_); }
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  test::Rows query(const std::string& sql) {
    PGresult* res = PQexec(conn_, sql.c_str());
    test::Rows rows;
    const auto st = PQresultStatus(res);
    EXPECT_TRUE(st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) << PQresultErrorMessage(res);
    for (int r = 0; r < PQntuples(res); ++r) {
      std::vector<std::string> row;
      for (int c = 0; c < PQnfields(res); ++c) {
        row.emplace_back(PQgetisnull(res, r, c) ? "<null>" : PQgetvalue(res, r, c));
      }
      rows.push_back(std::move(row));
    }
    PQclear(res);
    return rows;
  }
  int64_t count(const std::string& where = "true") {
    return std::stoll(query("SELECT count(*) FROM pgwarden_history WHERE " + where)[0][0]);
  }

 private:
  PGconn* conn_;
};

class PostgresStore : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path bin = findPgBin();
    if (bin.empty()) {
      PGW_MISSING_TOOL("PostgreSQL server binaries (initdb, pg_ctl) not found under "
                       "/usr/lib/postgresql/*/bin or $PGW_PGBIN");
    }
    ASSERT_TRUE(server_.init(bin)) << server_.serverLog();
  }

  // A spool of its own for each recorder, unless a test reuses one on purpose.
  HistoryConfig config() {
    HistoryConfig c;
    c.store = "postgres";
    c.dsn = server_.dsn();
    c.flush_interval = std::chrono::milliseconds(20);
    c.spool_path = spools_.file("history-" + std::to_string(++spool_count_) + ".spool");
    return c;
  }

  PostgresServer server_;
  test::TempDir spools_;
  int spool_count_ = 0;
};

TEST_F(PostgresStore, CreatesSchemaAndRoundTripsEveryField) {
  HistoryConfig c = config();
  c.instance_id = "pgw-pg";
  auto rec = makeRecorder(c);
  Record r = makeRecord(42, "SELECT * FROM orders WHERE note = 'tab\there\\n' -- caf\xC3\xA9");
  r.started_at_us = 1714564800123456;
  r.finished_at_us = 1714564800125956;
  r.duration_us = 2500;
  r.instance_id.clear();
  r.tables = {"public.orders", "sales.\"Odd\""};
  r.guard_actions = R"([{"guard":"row_limit","action":"rewrite","code":"limit_added","reason":"LIMIT 1000 added"}])";
  r.outcome = Outcome::kCancelled;
  r.sqlstate = "57014";
  r.error_message = "canceling statement\ndue to user request";
  r.truncated = true;
  r.single_zero = true;
  r.protocol = "extended";
  r.tool_name = "late_shipments";
  r.tool_args = R"({"from":"2024-07-01"})";
  r.request_id = R"("turn-7")";
  r.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  r.host = "10.0.0.2:5432";
  ASSERT_TRUE(rec->submit(std::move(r)));
  // What PostgreSQL would refuse as is: invalid UTF-8, NUL, a \u0000 escape, broken JSON.
  Record bad = makeRecord(43, std::string("SELECT '\xFF\xFE'") + '\0');
  bad.guard_actions = R"([{"guard":"x","reason":"nul \u0000 here"}])";
  bad.conversation_id = "conv\xC3";
  ASSERT_TRUE(rec->submit(std::move(bad)));
  Record broken = makeRecord(44, "SELECT 3");
  broken.guard_actions = "{not json";
  ASSERT_TRUE(rec->submit(std::move(broken)));
  rec->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(rec->stats().written, 3u);
  EXPECT_EQ(rec->stats().rejected, 0u);

  Client db(server_.dsn());
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(db.query("SELECT max(version) FROM pgwarden_history_schema")[0][0],
            std::to_string(kSchemaVersion));
  EXPECT_EQ(db.query("SELECT count(*) FROM pg_indexes WHERE tablename = 'pgwarden_history' AND "
                     "indexname LIKE '%_idx'")[0][0],
            "4");
  const auto rows = db.query(
      "SET TimeZone = 'UTC'; SELECT to_char(started_at, 'YYYY-MM-DD HH24:MI:SS.US'), "
      "duration_us, instance_id, session_id, tables->>1, guard_actions->0->>'code', outcome, "
      "sqlstate, error_message, result_truncated, single_zero, protocol, sql_text, "
      "pg_typeof(started_at)::text, pg_typeof(tables)::text, sql_truncated "
      "FROM pgwarden_history ORDER BY id");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{
                         "2024-05-01 12:00:00.123456", "2500", "pgw-pg", "42", "sales.\"Odd\"",
                         "limit_added", "cancelled", "57014",
                         "canceling statement\ndue to user request", "t", "t", "extended",
                         "SELECT * FROM orders WHERE note = 'tab\there\\n' -- caf\xC3\xA9",
                         "timestamp with time zone", "jsonb", "f"}));
  EXPECT_EQ(rows[1][12], "SELECT '\xEF\xBF\xBD\xEF\xBF\xBD'");
  EXPECT_EQ(db.query("SELECT guard_actions->0->>'reason', conversation_id FROM pgwarden_history "
                     "WHERE session_id = 43")[0],
            (std::vector<std::string>{"nul \xEF\xBF\xBD here", "conv\xEF\xBF\xBD"}));
  EXPECT_EQ(db.query("SELECT guard_actions #>> '{}' FROM pgwarden_history WHERE session_id = 44")[0]
                [0],
            "{not json");
  EXPECT_EQ(db.query("SELECT tool_name, tool_args FROM pgwarden_history WHERE session_id = 42")[0],
            (std::vector<std::string>{"late_shipments", R"({"from":"2024-07-01"})"}));
  EXPECT_EQ(db.query("SELECT request_id, traceparent FROM pgwarden_history WHERE session_id = 42")[0],
            (std::vector<std::string>{R"("turn-7")",
                                      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}));
  EXPECT_EQ(db.query("SELECT host FROM pgwarden_history WHERE session_id = 42")[0][0],
            "10.0.0.2:5432");
  // A second recorder (another instance, or a restart) finds the schema in place.
  auto again = makeRecorder(config());
  again->shutdown(std::chrono::seconds(5));
}

// A table of schema version 7 (no host column) gains it in place, with another instance's
// writes going on.
TEST_F(PostgresStore, AVersionSevenTableGainsHostInPlace) {
  {
    auto rec = makeRecorder(config());
    ASSERT_TRUE(rec->submit(makeRecord(1, "SELECT 1")));
    rec->shutdown(std::chrono::seconds(5));
  }
  Client db(server_.dsn());
  ASSERT_TRUE(db.ok());
  db.query("ALTER TABLE pgwarden_history DROP COLUMN host");
  db.query("DELETE FROM pgwarden_history_schema WHERE version = 8");
  auto rec = makeRecorder(config());
  Record r = makeRecord(2, "SELECT 2");
  r.host = "primary";
  ASSERT_TRUE(rec->submit(std::move(r)));
  rec->shutdown(std::chrono::seconds(5));
  EXPECT_EQ(db.query("SELECT max(version) FROM pgwarden_history_schema")[0][0], "8");
  // Rows from before have '' as every text column added in place: "reached no server" by name.
  EXPECT_EQ(db.query("SELECT coalesce(host, '<null>') FROM pgwarden_history ORDER BY id"),
            (std::vector<std::vector<std::string>>{{""}, {"primary"}}));
}

TEST_F(PostgresStore, ServerStoppedMidRunQueuesThenDeliversAndCountsOverflow) {
  HistoryConfig c = config();
  c.queue_size = 200;
  c.batch_size = 50;
  auto rec = makeRecorder(c);
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
  ASSERT_TRUE(waitFor([&] { return rec->stats().written == 100; }));

  ASSERT_TRUE(server_.stop());
  size_t accepted = 0;
  std::chrono::nanoseconds slowest{0};
  for (uint64_t i = 100; i < 400; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    accepted += rec->submit(makeRecord(i, "SELECT 2")) ? 1 : 0;
    slowest = std::max(slowest, std::chrono::steady_clock::now() - t0);
  }
  EXPECT_EQ(accepted, 200u);
  EXPECT_EQ(rec->stats().dropped, 100u);
  ASSERT_TRUE(waitFor([&] { return rec->stats().write_errors >= 2; }));
  EXPECT_EQ(rec->stats().written, 100u);
  EXPECT_EQ(rec->stats().queue_depth, 200u);
  // Still no blocking while the writer keeps failing to reconnect.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(rec->submit(makeRecord(999, "SELECT 3")));
  slowest = std::max(slowest, std::chrono::steady_clock::now() - t0);
  std::printf("slowest submit while PostgreSQL was down: %.1f us\n",
              std::chrono::duration<double, std::micro>(slowest).count());

  ASSERT_TRUE(server_.start()) << server_.serverLog();
  ASSERT_TRUE(waitFor([&] { return rec->stats().written == 300; }, std::chrono::seconds(30)))
      << "written " << rec->stats().written;
  rec->shutdown(std::chrono::seconds(10));
  const auto s = rec->stats();
  EXPECT_EQ(s.submitted, 401u);
  EXPECT_EQ(s.dropped, 101u);
  EXPECT_EQ(s.written + s.dropped + s.rejected + s.queue_depth, s.submitted);

  Client db(server_.dsn());
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(db.count(), 300);
  EXPECT_EQ(db.query("SELECT count(DISTINCT session_id), min(session_id), max(session_id) FROM "
                     "pgwarden_history")[0],
            (std::vector<std::string>{"300", "0", "299"}));
}

// With durability: process the records stay in the spool (StoredOrNotRecordsFromBeforeACrash...).
TEST_F(PostgresStore, ShutdownWithServerDownGivesUpAtTheDeadline) {
  HistoryConfig c = config();
  c.durability = Durability::kOff;
  auto rec = makeRecorder(c);
  ASSERT_TRUE(server_.stop());
  for (uint64_t i = 0; i < 30; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
  const auto t0 = std::chrono::steady_clock::now();
  rec->shutdown(std::chrono::milliseconds(500));
  std::printf("shutdown with PostgreSQL down took %.0f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count());
  EXPECT_EQ(rec->stats().dropped, 30u);
  EXPECT_EQ(rec->stats().written, 0u);
}

// A crash leaves some records stored but not marked consumed in the spool, and others not
// stored at all (the server was down): the next start stores each exactly once, in order.
TEST_F(PostgresStore, StoredOrNotRecordsFromBeforeACrashAreStoredExactlyOnce) {
  HistoryConfig c = config();
  c.batch_size = 50;
  {
    auto rec = makeRecorder(c);
    for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
    ASSERT_TRUE(waitFor([&] { return rec->stats().written == 100; }));
    ASSERT_TRUE(server_.stop());
    for (uint64_t i = 100; i < 130; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 2")));
    rec->shutdown(std::chrono::milliseconds(300));
    EXPECT_EQ(rec->stats().dropped, 0u);
    EXPECT_EQ(rec->stats().queue_depth, 30u);
  }
  // As if killed right after the first COPY committed: nothing marked consumed.
  test::forgetConsumedMarks(c.spool_path);
  ASSERT_TRUE(server_.start()) << server_.serverLog();
  auto rec = makeRecorder(c);
  EXPECT_EQ(rec->stats().recovered, 130u);
  for (uint64_t i = 130; i < 140; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 3")));
  rec->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(rec->stats().written, 140u);
  EXPECT_EQ(rec->stats().rejected, 0u);
  Client db(server_.dsn());
  EXPECT_EQ(db.count(), 140);
  EXPECT_EQ(db.query("SELECT count(DISTINCT record_uid), count(DISTINCT session_id) FROM "
                     "pgwarden_history")[0],
            (std::vector<std::string>{"140", "140"}));
  // Insertion order is still the order the statements ended.
  EXPECT_EQ(db.query("SELECT count(*) FROM (SELECT session_id, lag(session_id) OVER (ORDER BY id) "
                     "AS prev FROM pgwarden_history) t WHERE prev > session_id")[0][0],
            "0");
}

TEST_F(PostgresStore, RefusedRowsAreIsolatedAndCounted) {
  makeRecorder(config())->shutdown(std::chrono::seconds(5));
  Client db(server_.dsn());
  ASSERT_TRUE(db.ok());
  db.query("ALTER TABLE pgwarden_history ADD CONSTRAINT no_poison CHECK (sql_text <> 'poison')");
  HistoryConfig c = config();
  c.batch_size = 40;
  c.flush_interval = std::chrono::milliseconds(200);
  auto rec = makeRecorder(c);
  for (uint64_t i = 0; i < 40; ++i) {
    ASSERT_TRUE(rec->submit(makeRecord(i, i % 10 == 3 ? "poison" : "SELECT 1")));
  }
  rec->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(rec->stats().written, 36u);
  EXPECT_EQ(rec->stats().rejected, 4u);
  EXPECT_EQ(db.count(), 36);
}

TEST_F(PostgresStore, UnreachableAtStartupStartsDownAndCatchesUp) {
  HistoryConfig c = config();
  c.batch_size = 4;
  ASSERT_TRUE(server_.stop());
  auto rec = makeRecorder(c);  // a history database that is down does not stop start-up
  EXPECT_FALSE(rec->stats().store_up);
  // Back without any traffic: the writer's probe opens it and creates the table.
  ASSERT_TRUE(server_.start());
  ASSERT_TRUE(waitFor([&] { return rec->stats().store_up; }, std::chrono::seconds(15)));
  {
    Client db(server_.dsn());
    EXPECT_EQ(db.count(), 0);
  }
  // Down again with records waiting: none lost, all written once it is back.
  ASSERT_TRUE(server_.stop());
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
  ASSERT_TRUE(waitFor([&] { return !rec->stats().store_up; }, std::chrono::seconds(15)));
  EXPECT_EQ(rec->stats().written, 0u);
  EXPECT_EQ(rec->stats().queue_depth, 10u);
  ASSERT_TRUE(server_.start());
  ASSERT_TRUE(waitFor([&] { return rec->stats().written == 10; }, std::chrono::seconds(15)));
  EXPECT_TRUE(rec->stats().store_up);
  rec->shutdown(std::chrono::seconds(5));
  Client db(server_.dsn());
  EXPECT_EQ(db.count(), 10);
  EXPECT_EQ(rec->stats().dropped, 0u);
}

TEST(PostgresStoreConfig, UnparsableConnectionStringFailsAtStartupWithoutItsSecrets) {
  for (const std::string& dsn : {std::string("host=127.0.0.1 password=s3cr3t-pw port"),
                                std::string("postgresql://history:s3cr3t%zz@127.0.0.1/history")}) {
    HistoryConfig c;
    c.store = "postgres";
    c.dsn = dsn;
    try {
      makeRecorder(c);
      ADD_FAILURE() << "no error for " << dsn;
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("the connection string does not parse"), std::string::npos) << what;
      EXPECT_EQ(what.find("s3cr3t"), std::string::npos) << what;
    }
  }
}

TEST_F(PostgresStore, RetentionPrunes) {
  HistoryConfig c = config();
  c.max_rows = 30;
  auto rec = makeRecorder(c);
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
  ASSERT_TRUE(waitFor([&] { return rec->stats().written == 100; }));
  Client db(server_.dsn());
  EXPECT_TRUE(waitFor([&] { return db.count() == 30; }, std::chrono::seconds(15)));
  EXPECT_EQ(db.query("SELECT min(session_id) FROM pgwarden_history")[0][0], "70");
  rec->shutdown(std::chrono::seconds(5));
}

TEST_F(PostgresStore, ReportsGiveTheSameRowsAsOnSqlite) {
  const int64_t now_us = test::nowUs();
  auto rec = makeRecorder(config());
  const auto seed = test::reportSeed(now_us);
  for (auto r : seed) ASSERT_TRUE(rec->submit(std::move(r)));
  rec->shutdown(std::chrono::seconds(10));
  ASSERT_EQ(rec->stats().written, seed.size());

  auto run = [&](ReportKind kind, std::chrono::milliseconds since = {}) {
    ReportOptions o;
    o.kind = kind;
    o.store = "postgres";
    o.target = server_.dsn();
    o.since = since;
    o.now_us = now_us;
    auto t = runReport(o);
    EXPECT_TRUE(t.ok()) << t.error();
    return t.ok() ? *t : ReportTable{};
  };
  test::expectRetries(run(ReportKind::kRetries), now_us);
  test::expectRepeats(run(ReportKind::kRepeats), false);
  test::expectRepeats(run(ReportKind::kRepeats, std::chrono::hours(24 * 7)), true);
  test::expectDenials(run(ReportKind::kDenials));
  test::expectZeros(run(ReportKind::kZeros));
  ReportOptions conv;
  conv.kind = ReportKind::kConversation;
  conv.store = "postgres";
  conv.target = server_.dsn();
  for (const auto& [key, count] : {std::pair<std::string, size_t>{"c1", 6}, {"session:i1:77", 3}}) {
    conv.conversation = key;
    auto t = runReport(conv);
    ASSERT_TRUE(t.ok()) << t.error();
    ASSERT_EQ(t->rows.size(), count) << key;
    EXPECT_EQ(t->rows.back()[t->column("n")].text, std::to_string(count));
    if (key == "c1") {
      EXPECT_EQ(t->rows[0][t->column("warning_codes")].text, "UNKNOWN_VALUE");
      EXPECT_NE(t->rows[5][t->column("sql_text")].text.find("'DELAYED'"), std::string::npos);
    }
  }

  // The command, with the connection string taken from a dsn_file.
  test::TempDir dir;
  const std::string dsn_file = dir.file("dsn");
  std::ofstream(dsn_file) << server_.dsn() << "\n";
  const std::string cfg = dir.file("pgwarden.yaml");
  std::ofstream(cfg) << "history:\n  store: postgres\n  dsn_file: " << dsn_file << "\n";
  ReportRequest request;
  request.options.kind = ReportKind::kDenials;
  request.config_file = cfg;
  request.format = ReportFormat::kJson;
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(runReportCommand(request, out, err), 0) << err.str();
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["rows"][0]["denials"], 4);
}

}  // namespace
}  // namespace pgwarden::history
