// history: `history verify` over real SQLite and JSON-lines stores written by the recorder: an
// untouched store, a restart, a key rotation and an export verify; one record's SQL edited, one
// deleted, one forged, two swapped each fail naming the record and what is wrong.
#include "history/verify.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "chain_util.h"
#include "history/store.h"

namespace pgwarden::history {
namespace {

using test::sqliteQuery;
using test::TempDir;
using test::writeChained;

HistoryConfig chained(const TempDir& dir, const std::string& store) {
  return test::chainedConfig(dir, store);
}

struct VerifyRun {
  int code;
  std::string out;
};

VerifyRun verify(const HistoryConfig& c, const HistoryCommandOptions& o = {}) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = verifyHistoryCommand(c, o, out, err);
  return {code, out.str() + err.str()};
}

bool has(const VerifyRun& r, const std::string& text) {
  return r.out.find(text) != std::string::npos;
}

TEST(VerifySqlite, AnUntouchedStoreAndARestartVerify) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 30);
  writeChained(c, 30, 5);
  const VerifyRun r = verify(c);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "ok: 35 records")) << r.out;
  EXPECT_TRUE(has(r, "instance test-instance: chain_seq 1..35")) << r.out;
}

TEST(VerifySqlite, AnEditedStatementIsNamed) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 20);
  sqliteQuery(c.path, "UPDATE pgwarden_history SET sql_text = 'SELECT harmless' WHERE id = 7");
  const VerifyRun r = verify(c);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r, "edited: record id 7 (instance test-instance, chain_seq 7)")) << r.out;
}

TEST(VerifySqlite, AnEditedGuardActionIsNamed) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 10);
  sqliteQuery(c.path, "UPDATE pgwarden_history SET guard_actions = '[]' WHERE id = 3");
  EXPECT_TRUE(has(verify(c), "edited: record id 3 ")) << verify(c).out;
}

TEST(VerifySqlite, ADeletedRecordIsNamedAsMissing) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 20);
  sqliteQuery(c.path, "DELETE FROM pgwarden_history WHERE id = 9");
  const VerifyRun r = verify(c);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r,
                  "missing: record id 10 (instance test-instance, chain_seq 10): chain_seq 9 "
                  "should come between record id 8 and this one"))
      << r.out;
}

TEST(VerifySqlite, AForgedRecordIsNamedAsInserted) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 10);
  // A copy of record 4, chain fields and all, with other SQL: stored last.
  sqliteQuery(c.path,
              "INSERT INTO pgwarden_history (started_at, finished_at, instance_id, "
              "sql_text, chain_seq, chain_key, chain_hash) SELECT started_at, finished_at, "
              "instance_id, 'DROP TABLE orders', chain_seq, chain_key, chain_hash FROM "
              "pgwarden_history WHERE id = 4");
  const VerifyRun r = verify(c);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r, "inserted: record id 11 (instance test-instance, chain_seq 4)")) << r.out;
}

TEST(VerifySqlite, ARecordWithoutChainFieldsInTheChainIsInserted) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 5);
  sqliteQuery(c.path,
              "INSERT INTO pgwarden_history (started_at, finished_at, instance_id, "
              "sql_text) VALUES ('2026-01-01T00:00:00.000000Z', "
              "'2026-01-01T00:00:00.000000Z', 'test-instance', 'SELECT forged')");
  const VerifyRun r = verify(c);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r,
                  "inserted: record id 6 (instance test-instance, chain_seq 0): it has no "
                  "chain fields"))
      << r.out;
}

TEST(VerifySqlite, TwoSwappedRecordsAreNamedAsReordered) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 12);
  // Every column but id: rows 5 and 8 trade places.
  sqliteQuery(c.path, "CREATE TABLE swap AS SELECT * FROM pgwarden_history WHERE id IN (5, 8)");
  std::string set;
  for (const auto& col : kColumns) {
    set += std::string(set.empty() ? "" : ", ") + col.name + " = (SELECT " + col.name +
           " FROM swap WHERE swap.id = 13 - pgwarden_history.id)";
  }
  sqliteQuery(c.path, "UPDATE pgwarden_history SET " + set + " WHERE id IN (5, 8)");
  sqliteQuery(c.path, "DROP TABLE swap");
  ASSERT_EQ(sqliteQuery(c.path, "SELECT sql_text FROM pgwarden_history WHERE id = 5")[0][0],
            "SELECT 7");
  const VerifyRun r = verify(c);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r, "reordered: record id 5 (instance test-instance, chain_seq 8)")) << r.out;
  EXPECT_TRUE(has(r, "it is stored before chain_seq 5 (record id 8): records were moved")) << r.out;
}

TEST(VerifySqlite, ARotatedKeyVerifiesWithBothAndNotWithoutTheOld) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 6);
  ASSERT_TRUE(rotateChainKey(c.chain_key_file).ok());
  writeChained(c, 6, 6);
  const VerifyRun ok = verify(c);
  EXPECT_EQ(ok.code, 0) << ok.out;
  auto keys = loadChainKeys(c.chain_key_file, false);
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(has(ok, "keys " + keys->keys[0].id + "," + keys->keys[1].id)) << ok.out;
  // Only the new key in the file: the old records cannot be told from forgeries.
  std::ofstream(c.chain_key_file, std::ios::trunc)
      << keys->keys[1].id << " " << std::string(64, '0') << "\n";
  const VerifyRun bad = verify(c);
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(has(bad, "inserted: record id 1 ")) << bad.out;
}

TEST(VerifySqlite, TheExportVerifiesAndAnEditInItIsNamed) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 15);
  HistoryCommandOptions o;
  o.output = dir.file("export.jsonl");
  std::ostringstream out, err;
  ASSERT_EQ(exportHistoryCommand(c, o, out, err), 0) << err.str();
  HistoryCommandOptions v;
  v.input = o.output;
  EXPECT_EQ(verify(c, v).code, 0) << verify(c, v).out;
  std::vector<std::string> lines;
  {
    std::ifstream in(o.output);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 15u);
  const size_t at = lines[11].find("SELECT 11");
  ASSERT_NE(at, std::string::npos);
  lines[11].replace(at, 9, "SELECT 99");
  std::ofstream(o.output, std::ios::trunc) << [&] {
    std::string all;
    for (const auto& l : lines) all += l + "\n";
    return all;
  }();
  const VerifyRun r = verify(c, v);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r, "edited: line 12 (instance test-instance, chain_seq 12)")) << r.out;
}

TEST(VerifySqlite, SinceStartsTheWalkAtTheFirstRecordFromThen) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "sqlite");
  writeChained(c, 0, 10);
  sqliteQuery(c.path, "UPDATE pgwarden_history SET sql_text = 'x' WHERE id = 2");
  sqliteQuery(c.path,
              "UPDATE pgwarden_history SET started_at = '2000-01-01T00:00:00.000000Z' "
              "WHERE id <= 5");
  HistoryCommandOptions o;
  o.since_us = *parseSince("2001-01-01T00:00:00Z", 0);
  const VerifyRun r = verify(c, o);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r, "chain_seq 6..10")) << r.out;
}

std::vector<std::string> fileLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

void rewriteFile(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::trunc);
  for (const auto& l : lines) out << l << "\n";
}

TEST(VerifyJsonl, UntouchedAndRestartedVerifyTamperedDoesNot) {
  TempDir dir;
  const HistoryConfig c = chained(dir, "jsonl");
  writeChained(c, 0, 10);
  writeChained(c, 10, 4);
  EXPECT_EQ(verify(c).code, 0) << verify(c).out;
  const auto lines = fileLines(c.path);
  ASSERT_EQ(lines.size(), 14u);

  auto edited = lines;
  edited[3].replace(edited[3].find("SELECT 3"), 8, "SELECT 0");
  rewriteFile(c.path, edited);
  EXPECT_TRUE(has(verify(c), "edited: line 4 (instance test-instance, chain_seq 4)"))
      << verify(c).out;

  auto deleted = lines;
  deleted.erase(deleted.begin() + 5);
  rewriteFile(c.path, deleted);
  EXPECT_TRUE(has(verify(c), "missing: line 6 (instance test-instance, chain_seq 7)"))
      << verify(c).out;

  auto forged = lines;
  forged.insert(forged.begin() + 9, lines[2]);
  rewriteFile(c.path, forged);
  EXPECT_TRUE(has(verify(c), "inserted: line 10 (instance test-instance, chain_seq 3)"))
      << verify(c).out;

  auto swapped = lines;
  std::swap(swapped[1], swapped[4]);
  rewriteFile(c.path, swapped);
  EXPECT_TRUE(has(verify(c), "reordered: line 2 (instance test-instance, chain_seq 5)"))
      << verify(c).out;

  rewriteFile(c.path, lines);
  EXPECT_EQ(verify(c).code, 0);
}

TEST(VerifyCommand, NoKeyFileIsAUsageError) {
  TempDir dir;
  HistoryConfig c = chained(dir, "sqlite");
  c.chain_key_file = dir.file("absent.key");
  EXPECT_EQ(verify(c).code, 2);
}

TEST(VerifyCommand, SinceTakesADurationOrATime) {
  EXPECT_EQ(parseSince("1h", 7'200'000'000), 3'600'000'000);
  EXPECT_EQ(parseSince("1970-01-01T00:01:00Z", 0), 60'000'000);
  EXPECT_FALSE(parseSince("yesterday", 0).has_value());
}

}  // namespace
}  // namespace pgwarden::history
