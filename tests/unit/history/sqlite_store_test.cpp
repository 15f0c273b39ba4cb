// history: the recorder with real SQLite files (and the JSON-lines file): round trip of every
// field, queue overflow while another connection holds the write lock, flush on shutdown,
// retention, redaction, and isolation of a record the store refuses.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "history/recorder.h"
#include "history/store.h"
#include "history/text.h"
#include "test_util.h"

namespace pgwarden::history {
namespace {

using test::makeRecord;
using test::sqliteQuery;
using test::TempDir;
using test::waitFor;

HistoryConfig sqliteConfig(const TempDir& dir) {
  HistoryConfig c;
  c.store = "sqlite";
  c.path = dir.file("history.db");
  c.queue_size = 10000;
  c.batch_size = 64;
  c.flush_interval = std::chrono::milliseconds(10);
  return c;
}

int64_t countRows(const std::string& path, const std::string& where = "1=1") {
  return std::stoll(sqliteQuery(path, "SELECT count(*) FROM pgwarden_history WHERE " + where)[0][0]);
}

TEST(SqliteStore, CreatesSchemaInWalModeWithIndexes) {
  TempDir dir;
  auto rec = makeRecorder(sqliteConfig(dir));
  const std::string path = dir.file("history.db");
  EXPECT_EQ(sqliteQuery(path, "PRAGMA journal_mode")[0][0], "wal");
  EXPECT_EQ(sqliteQuery(path, "SELECT max(version) FROM pgwarden_history_schema")[0][0],
            std::to_string(kSchemaVersion));
  const auto idx = sqliteQuery(path,
                               "SELECT name FROM sqlite_master WHERE type = 'index' AND "
                               "tbl_name = 'pgwarden_history' ORDER BY name");
  std::vector<std::string> names;
  for (const auto& r : idx) names.push_back(r[0]);
  EXPECT_EQ(names, (std::vector<std::string>{"pgwarden_history_conversation_id_idx",
                                             "pgwarden_history_fingerprint_idx",
                                             "pgwarden_history_started_at_idx"}));
  // record_uid is kept unique by the spool marks, not an index (schema version 5).
  EXPECT_EQ(sqliteQuery(path, "SELECT count(*) FROM pgwarden_history_spool")[0][0], "0");
  rec.reset();  // one recorder per spool at a time
  // Opening again is idempotent.
  auto again = makeRecorder(sqliteConfig(dir));
  again->shutdown(std::chrono::seconds(5));
}

// A store pgwarden made has no statistics (it never runs ANALYZE): the reports' outcome
// conditions must still be read through the started_at range, not through every record of one
// outcome in the whole store. A file from before, with an outcome index, loses it.
TEST(SqliteStore, ReportConditionsReadTheTimeRangeEvenInAnOlderFile) {
  TempDir dir;
  const std::string path = dir.file("history.db");
  makeRecorder(sqliteConfig(dir))->shutdown(std::chrono::seconds(5));
  sqliteQuery(path,
              "CREATE INDEX IF NOT EXISTS pgwarden_history_outcome_idx ON pgwarden_history "
              "(outcome)");
  makeRecorder(sqliteConfig(dir))->shutdown(std::chrono::seconds(5));
  for (const char* condition :
       {"outcome IN ('denied', 'budget')",
        "outcome = 'ok' AND (single_zero = 1 OR (rows_returned = 0 AND statement_kind = "
        "'select'))"}) {
    const auto plan =
        sqliteQuery(path, std::string("EXPLAIN QUERY PLAN SELECT count(*) FROM "
                                      "pgwarden_history WHERE started_at >= ?1 AND ") +
                              condition);
    ASSERT_FALSE(plan.empty());
    EXPECT_NE(plan.back().back().find("pgwarden_history_started_at_idx"), std::string::npos)
        << condition << ": " << plan.back().back();
  }
}

TEST(SqliteStore, RoundTripsEveryField) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.instance_id = "pgw-test";
  auto rec = makeRecorder(c);

  Record r = makeRecord(42, "SELECT * FROM orders WHERE status = 'caf\xC3\xA9'");
  r.started_at_us = 1714564800123456;
  r.finished_at_us = 1714564800125956;
  r.duration_us = 2500;
  r.instance_id = "";  // filled from the config
  r.conversation_id = "conv-\xFF";  // invalid UTF-8 is repaired, not refused
  r.query_intent_sent = "lookup";
  r.query_intent_inferred = "aggregation";
  r.tables = {"public.orders", "sales.\"Odd\"\tname"};
  r.guard_actions = R"([{"guard":"row_limit","action":"rewrite","code":"limit_added","reason":"LIMIT 1000 added"},)"
                    R"({"guard":"result_screen","action":"warn","code":"PARTIAL_RESULT","reason":"partial"},)"
                    R"({"guard":"result_screen","action":"warn","code":"UNFILTERED","reason":"all rows"}])";
  r.outcome = Outcome::kError;
  r.deny_code = "";
  r.sqlstate = "57014";
  r.error_message = "canceling statement due to statement timeout";
  r.rows_returned = 7;
  r.truncated = true;
  r.rows_affected = 0;
  r.bytes_sent = 1234;
  r.protocol = "extended";
  r.single_zero = false;
  ASSERT_TRUE(rec->submit(std::move(r)));

  Record d = makeRecord(43, std::string("SELECT 1 /* nul:") + '\0' + " */");
  d.outcome = Outcome::kDenied;
  d.deny_code = "require_predicate";
  d.guard_actions = "not json {";
  d.single_zero = true;
  ASSERT_TRUE(rec->submit(std::move(d)));
  rec->shutdown(std::chrono::seconds(5));
  const auto stats = rec->stats();
  EXPECT_EQ(stats.submitted, 2u);
  EXPECT_EQ(stats.written, 2u);
  EXPECT_EQ(stats.dropped, 0u);
  EXPECT_EQ(stats.queue_depth, 0u);

  const auto rows = sqliteQuery(
      c.path,
      "SELECT id, started_at, finished_at, duration_us, instance_id, session_id, user_name, "
      "database_name, policy_group, client_addr, application_name, agent_id, conversation_id, "
      "query_intent_sent, query_intent_inferred, statement_kind, tables, sql_text, sql_truncated, "
      "fingerprint, guard_actions, outcome, deny_code, sqlstate, error_message, rows_returned, "
      "result_truncated, rows_affected, bytes_sent, protocol, single_zero, warnings "
      "FROM pgwarden_history ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  const auto& a = rows[0];
  EXPECT_EQ(a[1], "2024-05-01T12:00:00.123456Z");
  EXPECT_EQ(a[2], "2024-05-01T12:00:00.125956Z");
  EXPECT_EQ(a[3], "2500");
  EXPECT_EQ(a[4], "pgw-test");
  EXPECT_EQ(a[5], "42");
  EXPECT_EQ(a[6], "agent");
  EXPECT_EQ(a[7], "analytics");
  EXPECT_EQ(a[8], "agents");
  EXPECT_EQ(a[9], "127.0.0.1:50000");
  EXPECT_EQ(a[10], "pytest");
  EXPECT_EQ(a[11], "agent-7");
  EXPECT_EQ(a[12], "conv-\xEF\xBF\xBD");
  EXPECT_EQ(a[13], "lookup");
  EXPECT_EQ(a[14], "aggregation");
  EXPECT_EQ(a[15], "select");
  EXPECT_EQ(nlohmann::json::parse(a[16]),
            nlohmann::json::parse(R"(["public.orders", "sales.\"Odd\"\tname"])"));
  EXPECT_EQ(a[17], "SELECT * FROM orders WHERE status = 'caf\xC3\xA9'");
  EXPECT_EQ(a[18], "0");
  EXPECT_EQ(a[19], "0123456789abcdef");
  EXPECT_EQ(nlohmann::json::parse(a[20])[0]["code"], "limit_added");
  EXPECT_EQ(a[21], "error");
  EXPECT_EQ(a[22], "");
  EXPECT_EQ(a[23], "57014");
  EXPECT_EQ(a[24], "canceling statement due to statement timeout");
  EXPECT_EQ(a[25], "7");
  EXPECT_EQ(a[26], "1");
  EXPECT_EQ(a[27], "0");
  EXPECT_EQ(a[28], "1234");
  EXPECT_EQ(a[29], "extended");
  EXPECT_EQ(a[30], "0");
  EXPECT_EQ(a[31], "2");  // the result screens' findings in guard_actions

  const auto& b = rows[1];
  EXPECT_EQ(b[17], "SELECT 1 /* nul: */");  // NUL dropped
  EXPECT_EQ(b[20], "\"not json {\"");       // kept, as a JSON string
  EXPECT_EQ(b[21], "denied");
  EXPECT_EQ(b[22], "require_predicate");
  EXPECT_EQ(b[30], "1");
}

// The store binds a value only when it differs from the parameter's last binding (an empty
// text, NULL or an integer is kept across records). Values that go empty, come back, repeat and
// change, inside a batch and across batches, must each land as given.
TEST(SqliteStore, EachRecordKeepsItsOwnValuesWhenNeighboursRepeatOrEmptyThem) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.batch_size = 7;  // batches end between records of every pattern below
  auto rec = makeRecorder(c);
  constexpr int kRecords = 60;
  auto agentOf = [](int i) { return i % 3 == 0 ? std::string() : "agent-" + std::to_string(i % 4); };
  auto rowsOf = [](int i) { return i % 5 < 2 ? int64_t{0} : int64_t{i % 5}; };
  for (int i = 0; i < kRecords; ++i) {
    Record r = makeRecord(static_cast<uint64_t>(i % 2), "SELECT " + std::to_string(i));
    r.agent_id = agentOf(i);
    r.conversation_id = i % 2 == 0 ? "" : "c";
    r.error_message = i % 7 == 6 ? "boom " + std::to_string(i) : "";
    r.rows_returned = rowsOf(i);
    r.truncated = i % 4 == 1;
    r.request_id = i % 6 == 0 ? std::to_string(i) : "";
    ASSERT_TRUE(rec->submit(std::move(r)));
  }
  rec->shutdown(std::chrono::seconds(5));
  const auto rows = sqliteQuery(c.path,
                                "SELECT sql_text, agent_id, conversation_id, error_message, "
                                "rows_returned, result_truncated, request_id, session_id, "
                                "typeof(request_id) FROM pgwarden_history ORDER BY id");
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRecords));
  for (int i = 0; i < kRecords; ++i) {
    const auto& row = rows[static_cast<size_t>(i)];
    SCOPED_TRACE("record " + std::to_string(i));
    EXPECT_EQ(row[0], "SELECT " + std::to_string(i));
    EXPECT_EQ(row[1], agentOf(i));
    EXPECT_EQ(row[2], i % 2 == 0 ? "" : "c");
    EXPECT_EQ(row[3], i % 7 == 6 ? "boom " + std::to_string(i) : "");
    EXPECT_EQ(row[4], std::to_string(rowsOf(i)));
    EXPECT_EQ(row[5], i % 4 == 1 ? "1" : "0");
    EXPECT_EQ(row[6], i % 6 == 0 ? std::to_string(i) : "");
    EXPECT_EQ(row[7], std::to_string(i % 2));
    EXPECT_EQ(row[8], "text") << "an empty text is stored as '', never NULL";
  }
}

TEST(SqliteStore, FillsAMissingFingerprintFromTheWholeText) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.max_sql_bytes = 64;
  auto rec = makeRecorder(c);
  Record r = makeRecord(1, "SELECT * FROM orders WHERE status = 'late'");
  r.fingerprint.clear();
  ASSERT_TRUE(rec->submit(std::move(r)));
  // Longer than max_sql_bytes: fingerprinted whole, then cut.
  const std::string long_sql = "SELECT * FROM orders WHERE status = '" + std::string(200, 'x') + "'";
  Record l = makeRecord(2, long_sql);
  l.fingerprint.clear();
  ASSERT_TRUE(rec->submit(std::move(l)));
  rec->shutdown(std::chrono::seconds(5));
  const auto rows = sqliteQuery(
      c.path, "SELECT fingerprint, length(sql_text), sql_truncated FROM pgwarden_history ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  const std::string expected = *fingerprintSql("select * from orders where status = 'DELAYED'");
  EXPECT_EQ(rows[0], (std::vector<std::string>{expected, "42", "0"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{expected, "64", "1"}));
}

TEST(SqliteStore, LongTextIsCutAtACharacterBoundaryAndFlagged) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.max_sql_bytes = 64;
  auto rec = makeRecorder(c);
  std::string sql = "SELECT '";  // 8 bytes, then 3-byte euro signs: 8 + 18 * 3 = 62 <= 64 < 65
  for (int i = 0; i < 40; ++i) sql += "\xE2\x82\xAC";
  sql += "'";
  ASSERT_TRUE(rec->submit(makeRecord(1, sql)));
  ASSERT_TRUE(rec->submit(makeRecord(2, "SELECT 1")));
  rec->shutdown(std::chrono::seconds(5));
  const auto rows =
      sqliteQuery(c.path, "SELECT sql_text, sql_truncated FROM pgwarden_history ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].size(), 62u);
  EXPECT_TRUE(isValidUtf8(rows[0][0]));
  EXPECT_EQ(rows[0][0], sql.substr(0, 62));
  EXPECT_EQ(rows[0][1], "1");
  EXPECT_EQ(rows[1][0], "SELECT 1");
  EXPECT_EQ(rows[1][1], "0");
}

TEST(SqliteStore, RedactLiteralsStoresNormalizedTextThenCuts) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.redact_literals = true;
  c.max_sql_bytes = 64;
  auto rec = makeRecorder(c);
  // A literal far longer than max_sql_bytes: normalized first, so it fits whole afterwards.
  ASSERT_TRUE(rec->submit(makeRecord(
      1, "SELECT * FROM orders WHERE status = '" + std::string(500, 's') + "' AND id = 42")));
  // Unparsable: nothing of it is kept.
  ASSERT_TRUE(rec->submit(makeRecord(2, "SELEC 'secret-token' FORM orders")));
  // Long even when normalized: cut after normalizing.
  std::string wide = "SELECT ";
  for (int i = 0; i < 20; ++i) wide += "'secret" + std::to_string(i) + "', ";
  wide += "1";
  ASSERT_TRUE(rec->submit(makeRecord(3, wide)));
  rec->shutdown(std::chrono::seconds(5));
  const auto rows =
      sqliteQuery(c.path, "SELECT sql_text, sql_truncated FROM pgwarden_history ORDER BY id");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][0], "SELECT * FROM orders WHERE status = $1 AND id = $2");
  EXPECT_EQ(rows[0][1], "0");
  EXPECT_EQ(rows[1][0], std::string(kRedactedUnparsable));
  EXPECT_EQ(rows[2][0].rfind("SELECT $1, $2, $3", 0), 0u) << rows[2][0];
  EXPECT_EQ(rows[2][0].size(), 64u);
  EXPECT_EQ(rows[2][1], "1");
  for (const auto& row : rows) EXPECT_EQ(row[0].find("secret"), std::string::npos) << row[0];
}

TEST(SqliteStore, FlushOnShutdownWritesEverything) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.queue_size = 20000;
  c.batch_size = 20000;                      // never reached...
  c.flush_interval = std::chrono::hours(1);  // ...and never due: only shutdown writes
  auto rec = makeRecorder(c);
  for (uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(rec->stats().written, 0u);
  EXPECT_EQ(rec->stats().queue_depth, 5000u);
  EXPECT_EQ(countRows(c.path), 0);
  rec->shutdown(std::chrono::seconds(30));
  EXPECT_EQ(rec->stats().written, 5000u);
  EXPECT_EQ(rec->stats().queue_depth, 0u);
  EXPECT_EQ(countRows(c.path), 5000);
  EXPECT_EQ(sqliteQuery(c.path, "SELECT count(DISTINCT session_id) FROM pgwarden_history")[0][0],
            "5000");
  // After shutdown, submit drops and counts.
  EXPECT_FALSE(rec->submit(makeRecord(1, "SELECT 1")));
  EXPECT_EQ(rec->stats().dropped, 1u);
}

// Holds SQLite's write lock on `path` from another connection, the way a second writer would.
class WriteLock {
 public:
  explicit WriteLock(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  ~WriteLock() { release(); }
  void release() {
    if (db_ == nullptr) return;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
  }

 private:
  sqlite3* db_ = nullptr;
};

TEST(SqliteStore, LockedStoreQueuesThenDropsAndCountsWithoutBlockingSubmit) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.queue_size = 100;
  c.batch_size = 10;
  c.flush_interval = std::chrono::milliseconds(5);
  auto rec = makeRecorder(c);

  WriteLock lock(c.path);
  size_t accepted = 0;
  std::chrono::nanoseconds slowest{0};
  for (uint64_t i = 0; i < 1000; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = rec->submit(makeRecord(i, "SELECT " + std::to_string(i)));
    slowest = std::max(slowest, std::chrono::steady_clock::now() - t0);
    accepted += ok ? 1 : 0;
  }
  // Reaching this line at all while the writer is stuck on the lock is the point.
  EXPECT_EQ(accepted, 100u);
  EXPECT_EQ(rec->stats().dropped, 900u);
  EXPECT_EQ(rec->stats().queue_depth, 100u);
  ASSERT_TRUE(waitFor([&] { return rec->stats().write_errors >= 1; }));
  EXPECT_EQ(rec->stats().written, 0u);
  std::printf("slowest submit while the store was locked: %.1f us\n",
              std::chrono::duration<double, std::micro>(slowest).count());

  lock.release();
  ASSERT_TRUE(waitFor([&] { return rec->stats().written == 100; }));
  rec->shutdown(std::chrono::seconds(5));
  const auto s = rec->stats();
  EXPECT_EQ(s.submitted, 1000u);
  EXPECT_EQ(s.written + s.dropped + s.rejected + s.queue_depth, s.submitted);
  EXPECT_EQ(countRows(c.path), 100);
  // The first 100 submitted are the ones kept.
  EXPECT_EQ(sqliteQuery(c.path, "SELECT max(session_id) FROM pgwarden_history")[0][0], "99");
}

// A store that is down until told otherwise, and notes how many records each write carried.
class GatedStore final : public Store {
 public:
  GatedStore(std::atomic<bool>* open, std::vector<size_t>* sizes, std::mutex* mu)
      : open_(open), sizes_(sizes), mu_(mu) {}
  const char* name() const override { return "gated"; }
  Status open() override { return {}; }
  WriteResult write(std::span<const Record> records) override {
    if (!open_->load()) return {WriteOutcome::kRetry, "closed"};
    std::lock_guard<std::mutex> lock(*mu_);
    sizes_->push_back(records.size());
    return {};
  }
  Result<int64_t> prune(const Retention&) override { return int64_t{0}; }

 private:
  std::atomic<bool>* open_;
  std::vector<size_t>* sizes_;
  std::mutex* mu_;
};

TEST(Recorder, AWriterThatFellBehindCatchesUpInLargerBatches) {
  std::atomic<bool> open{false};
  std::vector<size_t> sizes;
  std::mutex mu;
  HistoryConfig c;
  c.queue_size = 1000;
  c.batch_size = 10;
  c.flush_interval = std::chrono::milliseconds(5);
  c.durability = Durability::kOff;
  auto rec = makeRecorderWithStore(c, std::make_unique<GatedStore>(&open, &sizes, &mu));
  for (uint64_t i = 0; i < 300; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
  open = true;
  rec->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(rec->stats().written, 300u);
  std::lock_guard<std::mutex> lock(mu);
  size_t total = 0;
  for (size_t n : sizes) {
    EXPECT_LE(n, 80u);  // 8 batches at most
    total += n;
  }
  EXPECT_EQ(total, 300u);
  // The batch taken before the store opened is retried as it was; the rest catch up 80 at a time.
  EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()), 80u);
}

// With durability: process the records stay in the spool instead (durability_test.cpp).
TEST(SqliteStore, ShutdownGivesUpAtItsDeadlineAndCountsWhatIsLost) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.durability = Durability::kOff;
  c.batch_size = 10;
  auto rec = makeRecorder(c);
  WriteLock lock(c.path);
  for (uint64_t i = 0; i < 50; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
  const auto t0 = std::chrono::steady_clock::now();
  rec->shutdown(std::chrono::milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - t0;
  std::printf("shutdown with the store locked took %.0f ms\n",
              std::chrono::duration<double, std::milli>(took).count());
  const auto s = rec->stats();
  EXPECT_EQ(s.written, 0u);
  EXPECT_EQ(s.dropped, 50u);
  EXPECT_EQ(s.queue_depth, 0u);
}

TEST(SqliteStore, RetentionKeepsTheNewestMaxRows) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.max_rows = 50;
  c.batch_size = 20;
  auto rec = makeRecorder(c);
  for (uint64_t i = 0; i < 200; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 1")));
  ASSERT_TRUE(waitFor([&] { return rec->stats().written == 200; }));
  EXPECT_TRUE(waitFor([&] { return countRows(c.path) == 50; }, std::chrono::seconds(15)))
      << countRows(c.path);
  EXPECT_EQ(sqliteQuery(c.path, "SELECT min(session_id), max(session_id) FROM pgwarden_history")[0],
            (std::vector<std::string>{"150", "199"}));
  rec->shutdown(std::chrono::seconds(5));
}

TEST(SqliteStore, RetentionDropsRecordsOlderThanMaxAge) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.max_age = std::chrono::hours(1);
  auto rec = makeRecorder(c);
  for (uint64_t i = 0; i < 100; ++i) {
    Record r = makeRecord(i, "SELECT 1");
    if (i % 2 == 0) r.started_at_us -= int64_t{2} * 3600 * 1000000;  // two hours ago
    ASSERT_TRUE(rec->submit(std::move(r)));
  }
  ASSERT_TRUE(waitFor([&] { return rec->stats().written == 100; }));
  EXPECT_TRUE(waitFor([&] { return countRows(c.path) == 50; }, std::chrono::seconds(15)));
  EXPECT_EQ(countRows(c.path, "session_id % 2 = 0"), 0);
  rec->shutdown(std::chrono::seconds(5));
}

TEST(SqliteStore, ARefusedRecordIsIsolatedAndCounted) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  c.batch_size = 50;
  c.flush_interval = std::chrono::milliseconds(200);
  {
    auto rec = makeRecorder(c);
    rec->shutdown(std::chrono::seconds(5));
  }
  // An operator's trigger refuses one statement text.
  sqliteQuery(c.path,
              "CREATE TRIGGER refuse BEFORE INSERT ON pgwarden_history WHEN NEW.sql_text = "
              "'poison' BEGIN SELECT RAISE(ABORT, 'refused by policy'); END");
  auto rec = makeRecorder(c);
  for (uint64_t i = 0; i < 50; ++i) {
    ASSERT_TRUE(rec->submit(makeRecord(i, i == 17 ? "poison" : "SELECT 1")));
  }
  rec->shutdown(std::chrono::seconds(10));
  const auto s = rec->stats();
  EXPECT_EQ(s.written, 49u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(countRows(c.path), 49);
  EXPECT_EQ(countRows(c.path, "session_id = 17"), 0);
}

TEST(SqliteStore, RefusesASchemaFromANewerVersion) {
  TempDir dir;
  HistoryConfig c = sqliteConfig(dir);
  makeRecorder(c)->shutdown(std::chrono::seconds(5));
  sqliteQuery(c.path, "INSERT INTO pgwarden_history_schema (version) VALUES (99)");
  EXPECT_THROW(makeRecorder(c), std::runtime_error);
}

TEST(SqliteStore, UnopenableFileFailsAtStartup) {
  HistoryConfig c;
  c.store = "sqlite";
  c.path = "/nonexistent-dir/for/history.db";
  c.durability = Durability::kOff;  // the store's own failure, not its spool's
  EXPECT_THROW(makeRecorder(c), std::runtime_error);
}

TEST(JsonlStore, OneValidJsonObjectPerLine) {
  TempDir dir;
  HistoryConfig c;
  c.store = "jsonl";
  c.path = dir.file("history.jsonl");
  c.flush_interval = std::chrono::milliseconds(10);
  auto rec = makeRecorder(c);
  Record a = makeRecord(1, "SELECT 'line\nbreak', '\xFF\xFE', 'tab\there'");
  a.guard_actions = "[\n  {\"guard\": \"tables\",\n   \"action\": \"deny\"}\n]";
  a.tables = {"public.\"we\"\"ird\""};
  ASSERT_TRUE(rec->submit(std::move(a)));
  Record b = makeRecord(2, "SELECT 2");
  b.guard_actions = "{broken";
  b.outcome = Outcome::kClientGone;
  ASSERT_TRUE(rec->submit(std::move(b)));
  for (uint64_t i = 3; i <= 100; ++i) ASSERT_TRUE(rec->submit(makeRecord(i, "SELECT 3")));
  rec->shutdown(std::chrono::seconds(5));

  std::ifstream in(c.path);
  std::string line;
  std::vector<nlohmann::json> objs;
  while (std::getline(in, line)) {
    ASSERT_TRUE(nlohmann::json::accept(line)) << line;
    objs.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(objs.size(), 100u);
  EXPECT_EQ(objs[0]["sql_text"], "SELECT 'line\nbreak', '\xEF\xBF\xBD\xEF\xBF\xBD', 'tab\there'");
  EXPECT_EQ(objs[0]["guard_actions"][0]["guard"], "tables");
  EXPECT_EQ(objs[0]["tables"][0], "public.\"we\"\"ird\"");
  EXPECT_EQ(objs[0]["session_id"], 1);
  EXPECT_EQ(objs[0]["sql_truncated"], false);
  EXPECT_EQ(objs[1]["guard_actions"], "{broken");
  EXPECT_EQ(objs[1]["outcome"], "client_gone");
  EXPECT_EQ(objs[99]["session_id"], 100);
}

TEST(OffStore, AcceptsNothingAndCountsNothing) {
  HistoryConfig c;
  c.store = "off";
  auto rec = makeRecorder(c);
  EXPECT_FALSE(rec->submit(makeRecord(1, "SELECT 1")));
  rec->shutdown(std::chrono::seconds(1));
  EXPECT_EQ(rec->stats().submitted, 0u);
  EXPECT_EQ(rec->stats().dropped, 0u);
}

}  // namespace
}  // namespace pgwarden::history
