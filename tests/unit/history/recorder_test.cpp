// history: the recorder with durability: process against real SQLite and JSON-lines files.
// Records the store never got are written at the next start; records it got, but whose spool
// entries were not yet marked consumed when the process died, are not written twice; a full spool
// drops and counts as the memory queue does; a version-1 table gains record_uid in place.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <iterator>
#include <set>
#include <sstream>

#include "history/recorder.h"
#include "history/schema.h"
#include "history/store.h"
#include "test_util.h"

namespace pgwarden::history {
namespace {

using test::forgetConsumedMarks;
using test::makeRecord;
using test::sqliteQuery;
using test::TempDir;

HistoryConfig fileConfig(const TempDir& dir, const std::string& store) {
  HistoryConfig c;
  c.store = store;
  c.path = dir.file(store == "jsonl" ? "history.jsonl" : "history.db");
  c.batch_size = 64;
  c.flush_interval = std::chrono::milliseconds(10);
  return c;
}

int64_t sqliteCount(const std::string& path, const std::string& what = "count(*)") {
  return std::stoll(sqliteQuery(path, "SELECT " + what + " FROM pgwarden_history")[0][0]);
}

std::vector<nlohmann::json> jsonLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

void submitRange(Recorder& rec, uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; ++i) {
    ASSERT_TRUE(rec.submit(makeRecord(i, "SELECT " + std::to_string(i))));
  }
}

// Holds SQLite's write lock on `path` from another connection, the way a second writer would.
class WriteLock {
 public:
  explicit WriteLock(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  ~WriteLock() {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
  }

 private:
  sqlite3* db_ = nullptr;
};

// The writer skips the JSON check of a guard_actions equal to the last one it prepared; whatever
// comes before, each record's actions end as valid, one-line JSON.
TEST(PrepareRecord, ActionsSeenBeforeAreKeptAndEveryOtherIsCheckedAndRepaired) {
  const HistoryConfig c;
  std::string known;
  auto prepared = [&](std::string actions) {
    Record r = makeRecord(1, "SELECT 1");
    r.guard_actions = std::move(actions);
    prepareRecord(r, c, &known);
    return r.guard_actions;
  };
  const std::string valid = R"([{"guard":"row_limit","action":"rewrite"}])";
  EXPECT_EQ(prepared(valid), valid);
  EXPECT_EQ(known, valid);
  EXPECT_EQ(prepared(valid), valid);
  EXPECT_EQ(prepared("not json {"), "\"not json {\"");
  EXPECT_EQ(prepared("[1,\n2]"), "[1, 2]");
  EXPECT_EQ(known, "[1, 2]");
  EXPECT_EQ(prepared("[1,\n2]"), "[1, 2]") << "the raw text differs from the one remembered";
  EXPECT_EQ(prepared("[1, 2"), "\"[1, 2\"") << "a prefix of the remembered text is checked";
  EXPECT_EQ(prepared(""), "[]");
  EXPECT_EQ(prepared(R"(["\u0000"])"), R"(["\ufffd"])");
  for (const auto& text : {valid, std::string("[1, 2]"), std::string("x")}) {
    Record r = makeRecord(1, "SELECT 1");
    r.guard_actions = text;
    prepareRecord(r, c);
    EXPECT_EQ(prepared(text), r.guard_actions) << "the same as without a remembered text";
  }
}

TEST(Durability, RecordsTheStoreNeverGotAreWrittenAtTheNextStart) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  {
    auto rec = makeRecorder(c);
    WriteLock lock(c.path);  // the store takes nothing: all 300 wait in the spool
    submitRange(*rec, 0, 300);
    rec->shutdown(std::chrono::milliseconds(200));
    const auto s = rec->stats();
    EXPECT_EQ(s.written, 0u);
    EXPECT_EQ(s.dropped, 0u);  // kept, not lost
    EXPECT_EQ(s.queue_depth, 300u);
  }
  auto rec = makeRecorder(c);
  EXPECT_EQ(rec->stats().recovered, 300u);
  submitRange(*rec, 300, 310);
  rec->shutdown(std::chrono::seconds(10));
  const auto s = rec->stats();
  EXPECT_EQ(s.written, 310u);
  EXPECT_EQ(s.submitted + s.recovered, s.written + s.dropped + s.rejected + s.queue_depth);
  EXPECT_EQ(sqliteCount(c.path), 310);
  EXPECT_EQ(sqliteCount(c.path, "count(DISTINCT session_id)"), 310);
  // The recovered ones went first.
  EXPECT_EQ(sqliteQuery(c.path,
                        "SELECT session_id FROM pgwarden_history ORDER BY id LIMIT 1 "
                        "OFFSET 300")[0][0],
            "300");
}

// The event loop submits views (history::RecordView): the recorder cuts the text it queues to
// max_sql_bytes at a character boundary and marks it cut, as for a Record, the spool names the
// view, and without a spool (durability off) the view is copied into the memory queue.
TEST(Durability, AViewIsCutNamedAndStoredWithOrWithoutTheSpool) {
  for (const Durability durability : {Durability::kProcess, Durability::kOff}) {
    SCOPED_TRACE(durability == Durability::kProcess ? "process" : "off");
    TempDir dir;
    HistoryConfig c = fileConfig(dir, "sqlite");
    c.durability = durability;
    c.max_sql_bytes = 15;
    auto rec = makeRecorder(c);
    Record r = makeRecord(1, "SELECT 'abcdef\xC3\xA9' AS drink");  // bytes 14 and 15 are "é"
    r.fingerprint = "0123456789abcdef";  // the writer needs no more of the text than it keeps
    std::string kept_text = r.sql_text;
    RecordView v = viewOf(r);
    ASSERT_TRUE(rec->submit(v));
    EXPECT_TRUE(v.sql_truncated);
    EXPECT_EQ(v.sql_text, "SELECT 'abcdef");
    EXPECT_EQ(r.sql_text, kept_text);  // the strings the view showed are untouched
    EXPECT_EQ(v.spool_seq != 0, durability == Durability::kProcess);
    rec->shutdown(std::chrono::seconds(10));
    EXPECT_EQ(rec->stats().written, 1u);
    const auto row = sqliteQuery(c.path, "SELECT sql_text, sql_truncated, record_uid IS NULL FROM pgwarden_history");
    ASSERT_EQ(row.size(), 1u);
    EXPECT_EQ(row[0][0], "SELECT 'abcdef");
    EXPECT_EQ(row[0][1], "1");
    EXPECT_EQ(row[0][2], durability == Durability::kProcess ? "0" : "1");
  }
}

TEST(Durability, WithDurabilityOffTheSameRecordsAreLostAndCounted) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  c.durability = Durability::kOff;
  {
    auto rec = makeRecorder(c);
    WriteLock lock(c.path);
    submitRange(*rec, 0, 50);
    rec->shutdown(std::chrono::milliseconds(200));
    EXPECT_EQ(rec->stats().dropped, 50u);
    EXPECT_EQ(rec->stats().queue_depth, 0u);
  }
  EXPECT_FALSE(std::filesystem::exists(c.path + ".spool"));
  auto rec = makeRecorder(c);
  rec->shutdown(std::chrono::seconds(5));
  EXPECT_EQ(sqliteCount(c.path), 0);
}

// Stores `n` records, then leaves the spool as a kill between the store's commit and the consumed
// mark would.
void storeThenDieBeforeMarking(const HistoryConfig& c, uint64_t n) {
  auto rec = makeRecorder(c);
  submitRange(*rec, 0, n);
  rec->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(rec->stats().written, n);
  rec.reset();
  forgetConsumedMarks(c.path + ".spool");
}

// The start after storeThenDieBeforeMarking(c, stored): the spool hands the `stored` records
// over again, and `more` new ones follow them.
void restartAndSubmitMore(const HistoryConfig& c, uint64_t stored, uint64_t more) {
  auto rec = makeRecorder(c);
  EXPECT_EQ(rec->stats().recovered, stored);
  submitRange(*rec, stored, stored + more);
  rec->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(rec->stats().rejected, 0u);
}

TEST(Durability, StoredButNotMarkedConsumedIsNotStoredTwiceInSqlite) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  storeThenDieBeforeMarking(c, 300);
  restartAndSubmitMore(c, 300, 20);
  EXPECT_EQ(sqliteCount(c.path), 320);
  EXPECT_EQ(sqliteCount(c.path, "count(DISTINCT record_uid)"), 320);
  EXPECT_EQ(sqliteCount(c.path, "count(DISTINCT session_id)"), 320);
}

TEST(Durability, StoredButNotMarkedConsumedIsNotWrittenTwiceToJsonl) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "jsonl");
  storeThenDieBeforeMarking(c, 200);
  {
    auto rec = makeRecorder(c);
    EXPECT_EQ(rec->stats().recovered, 200u);
    submitRange(*rec, 200, 210);
    rec->shutdown(std::chrono::seconds(10));
  }
  const auto lines = jsonLines(c.path);
  ASSERT_EQ(lines.size(), 210u);
  std::set<std::string> uids;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["session_id"], i);
    uids.insert(lines[i]["record_uid"].get<std::string>());
  }
  EXPECT_EQ(uids.size(), 210u);
  // durability: off writes record_uid as null, and the next start with the spool still reads
  // the last id from further back.
  c.durability = Durability::kOff;
  {
    auto rec = makeRecorder(c);
    submitRange(*rec, 210, 211);
    rec->shutdown(std::chrono::seconds(10));
  }
  EXPECT_TRUE(jsonLines(c.path).back()["record_uid"].is_null());
  c.durability = Durability::kProcess;
  forgetConsumedMarks(c.path + ".spool");
  makeRecorder(c)->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(jsonLines(c.path).size(), 211u);
}

TEST(Durability, AFullSpoolDropsAndCountsWithoutBlocking) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  c.max_sql_bytes = 64 << 10;
  c.spool_size = minSpoolSize(c.max_sql_bytes);
  c.queue_size = 100000;
  auto rec = makeRecorder(c);
  WriteLock lock(c.path);
  size_t accepted = 0;
  for (uint64_t i = 0; i < 300; ++i) {
    Record r = makeRecord(i, std::string(60 << 10, 'x'));
    accepted += rec->submit(std::move(r)) ? 1 : 0;
  }
  const auto s = rec->stats();
  EXPECT_LT(accepted, 300u);
  EXPECT_GT(accepted, 40u);
  EXPECT_EQ(s.dropped, 300u - accepted);
  EXPECT_EQ(s.queue_depth, accepted);
  EXPECT_GT(s.spool_used_bytes, s.spool_capacity - (64u << 10) * 2);
  EXPECT_EQ(s.spool_capacity, c.spool_size);
}

// Threads of this process in the background: SCHED_BATCH (3, the 41st field of a thread's stat)
// at nice 19 (the 19th).
int idleThreads() {
  int n = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(t.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    std::string nice;
    for (int i = 3; i <= 41 && fields >> field; ++i) {
      if (i == 19) nice = field;
    }
    n += field == "3" && nice == "19" ? 1 : 0;
  }
  return n;
}

// Behind the spool the writer waits in the background; a backlog (the store locked while the
// spool fills past an eighth) puts it back under the normal policy, and once it has drained it
// returns. writer_priority: normal, or the memory queue, keep it normal throughout.
TEST(Durability, TheWriterWaitsInTheBackgroundUntilABacklogPromotesIt) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  c.max_sql_bytes = 64 << 10;
  c.spool_size = minSpoolSize(c.max_sql_bytes);
  auto rec = makeRecorder(c);
  if (!test::threadsMayComeBackFromNice19()) {
    // The writer stays under the normal policy and writes as before.
    submitRange(*rec, 0, 10);
    ASSERT_TRUE(test::waitFor([&] { return rec->stats().written == 10; }));
    EXPECT_FALSE(rec->stats().writer_background);
    EXPECT_EQ(idleThreads(), 0);
    return;
  }
  ASSERT_TRUE(test::waitFor([&] { return rec->stats().writer_background; }));
  EXPECT_EQ(idleThreads(), 1);
  uint64_t accepted = 0;
  {
    WriteLock lock(c.path);
    const uint64_t mark = c.spool_size / 8;
    for (;;) {
      ASSERT_TRUE(rec->submit(makeRecord(accepted, std::string(16 << 10, 'x'))));
      ++accepted;
      const auto s = rec->stats();
      if (s.spool_used_bytes < mark) {
        ASSERT_EQ(s.writer_promotions, 0u) << s.spool_used_bytes << " of " << mark;
        ASSERT_TRUE(s.writer_background);
        continue;
      }
      EXPECT_EQ(s.writer_promotions, 1u);
      EXPECT_FALSE(s.writer_background);
      EXPECT_EQ(idleThreads(), 0);
      break;
    }
    EXPECT_GT(accepted, 2u);
  }
  // It goes back once under both low marks, which may be before the last records are written.
  ASSERT_TRUE(test::waitFor([&] { return rec->stats().written == accepted; }));
  ASSERT_TRUE(test::waitFor([&] { return rec->stats().writer_background; }));
  EXPECT_EQ(idleThreads(), 1);
  rec->shutdown(std::chrono::seconds(5));
  EXPECT_EQ(idleThreads(), 0);
  EXPECT_EQ(sqliteCount(c.path), static_cast<int64_t>(accepted));
  rec.reset();

  for (const bool memory : {false, true}) {
    HistoryConfig n = fileConfig(dir, "sqlite");
    n.background_writer = memory;  // the memory queue keeps it normal even when asked
    n.durability = memory ? Durability::kOff : Durability::kProcess;
    auto normal = makeRecorder(n);
    submitRange(*normal, 100, 110);
    ASSERT_TRUE(test::waitFor([&] { return normal->stats().written == 10; }));
    EXPECT_FALSE(normal->stats().writer_background);
    EXPECT_EQ(idleThreads(), 0);
  }
}

TEST(Durability, AVersionOneTableGainsRecordUidInPlace) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  std::string ddl = "CREATE TABLE pgwarden_history (id INTEGER PRIMARY KEY";
  for (const auto& col : kColumns) {
    // Version 1 had neither record_uid nor warnings.
    if (col.type != ColumnType::kUid && std::string_view(col.name) != kWarningsColumn) {
      ddl += std::string(", ") + col.name + " TEXT";
    }
  }
  ddl += ")";
  std::ofstream(c.path).close();  // an empty file is an empty database
  sqliteQuery(c.path, ddl);
  sqliteQuery(c.path,
              "CREATE TABLE pgwarden_history_schema (version INTEGER PRIMARY KEY, "
              "applied_at TEXT)");
  sqliteQuery(c.path, "INSERT INTO pgwarden_history_schema (version) VALUES (1)");
  sqliteQuery(c.path, "INSERT INTO pgwarden_history (sql_text) VALUES ('from version 1')");
  auto rec = makeRecorder(c);
  submitRange(*rec, 0, 3);
  rec->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(sqliteQuery(c.path, "SELECT max(version) FROM pgwarden_history_schema")[0][0],
            std::to_string(kSchemaVersion));
  const auto rows = sqliteQuery(c.path,
                                "SELECT sql_text, record_uid FROM pgwarden_history "
                                "ORDER BY id");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"from version 1", "<null>"}));
  EXPECT_NE(rows[3][1], "<null>");
}

// A file of schema version 7 (no host column) gains it in place: its rows keep no host, the new
// ones name theirs.
TEST(Durability, AVersionSevenTableGainsHostInPlace) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  {
    auto rec = makeRecorder(c);
    submitRange(*rec, 0, 2);
    rec->shutdown(std::chrono::seconds(10));
  }
  sqliteQuery(c.path, "ALTER TABLE pgwarden_history DROP COLUMN host");
  sqliteQuery(c.path, "DELETE FROM pgwarden_history_schema WHERE version = 8");
  auto rec = makeRecorder(c);
  Record r = makeRecord(5, "SELECT 'on a replica'");
  r.host = "10.0.0.2:5432";
  ASSERT_TRUE(rec->submit(std::move(r)));
  rec->shutdown(std::chrono::seconds(10));
  EXPECT_EQ(sqliteQuery(c.path, "SELECT max(version) FROM pgwarden_history_schema")[0][0], "8");
  const auto rows = sqliteQuery(c.path, "SELECT host FROM pgwarden_history ORDER BY id");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][0], "") << "text columns added in place are '' in the rows from before";
  EXPECT_EQ(rows[2][0], "10.0.0.2:5432");
}

// A file of schema version 4 kept record_uid unique by an index. Stored by such a pgwarden,
// killed before the spool's consumed mark: the next start moves the index to spool marks
// seeded from the stored record_uids, and the batch handed over again is still stored once.
TEST(Durability, AVersionFourFileGetsSpoolMarksAndStaysIdempotent) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  storeThenDieBeforeMarking(c, 300);
  // Back to what version 4 left: the unique index, no marks.
  sqliteQuery(c.path, "DROP TABLE pgwarden_history_spool");
  sqliteQuery(c.path, "DELETE FROM pgwarden_history_schema WHERE version >= 5");
  sqliteQuery(c.path,
              "CREATE UNIQUE INDEX pgwarden_history_record_uid_idx ON pgwarden_history "
              "(record_uid)");
  sqliteQuery(c.path,
              "INSERT INTO pgwarden_history (started_at, finished_at, sql_text) VALUES "
              "('2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', 'durability: off')");
  restartAndSubmitMore(c, 300, 20);
  EXPECT_EQ(sqliteCount(c.path), 321);
  EXPECT_EQ(sqliteCount(c.path, "count(DISTINCT record_uid)"), 320);
  EXPECT_EQ(sqliteQuery(c.path, "SELECT max(version) FROM pgwarden_history_schema")[0][0],
            std::to_string(kSchemaVersion));
  EXPECT_EQ(sqliteQuery(c.path,
                        "SELECT count(*) FROM sqlite_master WHERE name = "
                        "'pgwarden_history_record_uid_idx'")[0][0],
            "0");
  const auto marks = sqliteQuery(c.path, "SELECT epoch, last_seq FROM pgwarden_history_spool");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0][1], "320");
  EXPECT_EQ(
      sqliteQuery(c.path, "SELECT substr(max(record_uid), 1, 16) FROM pgwarden_history")[0][0],
      marks[0][0]);
}

// A file made with SQLite's default 4 KiB pages (every pgwarden before 8 KiB pages) keeps them,
// takes new records, and still skips a batch the spool hands over again; a new file gets 8 KiB.
TEST(Durability, AFileWithFourKibPagesKeepsThemAndStaysIdempotent) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  std::ofstream(c.path).close();
  sqliteQuery(c.path, "PRAGMA page_size=4096");
  sqliteQuery(c.path, "CREATE TABLE placeholder (x)");  // fixes the page size
  storeThenDieBeforeMarking(c, 150);
  restartAndSubmitMore(c, 150, 50);
  EXPECT_EQ(sqliteCount(c.path), 200);
  EXPECT_EQ(sqliteCount(c.path, "count(DISTINCT record_uid)"), 200);
  EXPECT_EQ(sqliteQuery(c.path, "PRAGMA page_size")[0][0], "4096");

  TempDir fresh;
  HistoryConfig n = fileConfig(fresh, "sqlite");
  makeRecorder(n)->shutdown(std::chrono::seconds(5));
  EXPECT_EQ(sqliteQuery(n.path, "PRAGMA page_size")[0][0], "8192");
}

TEST(Durability, ASpoolThatCannotBeOpenedStopsStartUp) {
  TempDir dir;
  HistoryConfig c = fileConfig(dir, "sqlite");
  c.spool_path = dir.file("missing/dir/history.spool");
  try {
    makeRecorder(c);
    FAIL() << "started without its spool";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing/dir/history.spool"), std::string::npos)
        << e.what();
  }
  HistoryConfig pg;
  pg.store = "postgres";
  pg.dsn = "host=/nonexistent-socket-dir";
  EXPECT_THROW(makeRecorder(pg), std::runtime_error);  // no file to put the spool beside
}

}  // namespace
}  // namespace pgwarden::history
