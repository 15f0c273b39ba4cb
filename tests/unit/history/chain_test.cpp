// history: the chain's key file (created 0600, read back, rotated with the old keys kept), the
// canonical form of a record's fields, and the writer's chain through a real SQLite store:
// consecutive chain_seq, each hash made from the previous one, and a restart that goes on.
#include "history/chain.h"

#include <gtest/gtest.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>

#include "chain_util.h"
#include "history/store.h"

namespace pgwarden::history {
namespace {

using test::makeRecord;
using test::sqliteQuery;
using test::TempDir;

TEST(ChainKeys, CreatedOnceWithMode0600AndReadBack) {
  TempDir dir;
  const std::string path = dir.file("history_chain.key");
  auto first = loadChainKeys(path, true);
  ASSERT_TRUE(first.ok()) << first.error();
  ASSERT_EQ(first->keys.size(), 1u);
  EXPECT_EQ(first->current().id.size(), 8u);
  EXPECT_EQ(first->current().secret.size(), 32u);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = loadChainKeys(path, true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->current().secret, first->current().secret);
  EXPECT_FALSE(loadChainKeys(dir.file("absent.key"), false).ok());
}

TEST(ChainKeys, RotationAddsAKeyAndKeepsTheOldOnes) {
  TempDir dir;
  const std::string path = dir.file("k");
  auto before = loadChainKeys(path, true);
  ASSERT_TRUE(before.ok());
  auto id = rotateChainKey(path);
  ASSERT_TRUE(id.ok()) << id.error();
  auto after = loadChainKeys(path, false);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->keys.size(), 2u);
  EXPECT_EQ(after->keys[0].secret, before->current().secret);
  EXPECT_EQ(after->current().id, *id);
  EXPECT_NE(after->current().secret, before->current().secret);
  ASSERT_NE(after->find(before->current().id), nullptr);
}

TEST(ChainKeys, AFileThatHoldsNoKeyIsAnError) {
  TempDir dir;
  const std::string path = dir.file("k");
  std::ofstream(path) << "not a key\n";
  auto keys = loadChainKeys(path, true);
  ASSERT_FALSE(keys.ok());
  EXPECT_NE(keys.error().find(":1: not a key"), std::string::npos) << keys.error();
}

TEST(ChainFieldsCanonical, JsonIsCompactWithSortedKeysAsJsonbGivesItBack) {
  EXPECT_EQ(canonicalJson("[]"), "[]");
  // What PostgreSQL's jsonb returns for {"guard":"g","action":"deny"}.
  EXPECT_EQ(canonicalJson("{\"action\": \"deny\", \"guard\": \"g\"}"),
            canonicalJson("{\"guard\":\"g\",\"action\":\"deny\"}"));
  EXPECT_EQ(canonicalJson("[\"a\", \"b\"]"), "[\"a\",\"b\"]");
  EXPECT_EQ(canonicalJson("{not json"), "{not json");
}

TEST(ChainFieldsCanonical, EveryTypeAsText) {
  Record r = makeRecord(7, "SELECT 1");
  r.started_at_us = 1'700'000'000'000'001;
  r.truncated = true;
  RowValues row(r);
  ChainFields f;
  canonicalFields(row, f);
  EXPECT_EQ(f[kStartedAtField], "2023-11-14T22:13:20.000001Z");
  EXPECT_EQ(f[kInstanceIdField], "test-instance");
  EXPECT_EQ(f[4], "7");                     // session_id
  EXPECT_EQ(f[15], "[\"public.orders\"]");  // tables
  EXPECT_EQ(f[25], "1");                    // result_truncated
  EXPECT_EQ(f[kRecordUidField], "");
}

// The message as schema version 6 made it: the previous hash, then each field but chain_hash
// as a 4-byte little-endian length and its bytes, up to chain_hash and record_uid.
// An older schema's chain message: the fields `skip` does not leave out, each behind its length.
ChainHash olderHash(std::string_view secret, const ChainHash& prev, const ChainFields& f,
                    const std::function<bool(size_t)>& skip) {
  std::string m(reinterpret_cast<const char*>(prev.data()), prev.size());
  for (size_t i = 0; i < f.size(); ++i) {
    if (i == kChainHashField || skip(i)) continue;
    const auto n = static_cast<uint32_t>(f[i].size());
    const char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                         static_cast<char>((n >> 16) & 0xff), static_cast<char>(n >> 24)};
    m.append(len, 4);
    m += f[i];
  }
  ChainHash out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(m.data()), m.size(), out.data(), &len);
  return out;
}

ChainHash version6Hash(std::string_view secret, const ChainHash& prev, const ChainFields& f) {
  return olderHash(secret, prev, f,
                   [](size_t i) { return i >= kFirstPostChainField && i < kRecordUidField; });
}

TEST(ChainFieldsCanonical, ARowWithoutRequestFieldsHashesAsBeforeTheyExisted) {
  const std::string secret(32, 'k');
  ChainHash prev{};
  prev[0] = 9;
  std::string scratch;
  Record r = makeRecord(7, "SELECT 1");
  ChainFields f;
  canonicalFields(RowValues(r), f);
  EXPECT_EQ(chainHash(secret, prev, f, scratch), version6Hash(secret, prev, f));
  r.request_id = "7";
  r.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  canonicalFields(RowValues(r), f);
  EXPECT_EQ(f[kFirstPostChainField], "7");
  EXPECT_NE(chainHash(secret, prev, f, scratch), version6Hash(secret, prev, f));
}

// Schema 7's message: request_id and traceparent when set, no host (kRecordUidField - 1).
ChainHash version7Hash(std::string_view secret, const ChainHash& prev, const ChainFields& f) {
  return olderHash(secret, prev, f, [&f](size_t i) {
    return i == kRecordUidField - 1 ||
           (i >= kFirstPostChainField && i < kRecordUidField && f[i].empty());
  });
}

TEST(ChainFieldsCanonical, ARowWithoutAHostHashesAsBeforeItExisted) {
  ASSERT_STREQ(kColumns[kRecordUidField - 1].name, "host");
  const std::string secret(32, 'k');
  ChainHash prev{};
  prev[0] = 3;
  std::string scratch;
  Record r = makeRecord(8, "SELECT 2");
  r.request_id = "8";
  ChainFields f;
  canonicalFields(RowValues(r), f);
  EXPECT_EQ(chainHash(secret, prev, f, scratch), version7Hash(secret, prev, f));
  r.host = "10.0.0.2:5432";
  canonicalFields(RowValues(r), f);
  EXPECT_EQ(f[kRecordUidField - 1], "10.0.0.2:5432");
  EXPECT_NE(chainHash(secret, prev, f, scratch), version7Hash(secret, prev, f))
      << "a host, once set, is covered by the chain";
}

// The writer builds the message straight from the row; a verifier from the fields it reads back.
// Both must give the same bytes for every kind of row, and the writer's JSON cache must follow a
// JSON value that changes, comes back, or is empty.
TEST(RowChainMessage, EqualsTheMessageOfTheCanonicalFields) {
  RowChainMessage writer;
  std::string expected;
  ChainFields f;
  ChainHash prev{};
  const char* actions[] = {"[]", R"([{"guard":"row_limit","b":1,"a":"x"}])", "",
                           R"([{"guard":"row_limit","b":1,"a":"x"}])", R"([{"z":[1,2],"a":null}])"};
  for (int i = 0; i < 40; ++i) {
    Record r = makeRecord(static_cast<uint64_t>(i + 1), "SELECT " + std::to_string(i));
    r.guard_actions = actions[i % 5];
    r.tables = i % 3 == 0 ? std::vector<std::string>{} : std::vector<std::string>{"public.t", "b\"q"};
    r.rows_returned = i * 1000 - 7;
    r.duration_us = -i;
    r.truncated = i % 2 == 0;
    if (i % 4 == 1) r.request_id = std::to_string(i);
    if (i % 6 == 5) r.host = "10.0.0.2:5432";
    if (i % 7 == 3) r.tool_args = R"({"b":2,"a":1})";
    prev[static_cast<size_t>(i) % prev.size()] = static_cast<unsigned char>(i * 37);
    RowValues row(r);
    row.setChain(static_cast<uint64_t>(i), "k1", "");
    canonicalFields(row, f);
    chainMessage(prev, f, expected);
    EXPECT_EQ(writer.build(prev, row), expected) << "row " << i;
  }
}

TEST(Chainer, EachRecordChainsFromThePreviousAndARestartGoesOn) {
  TempDir dir;
  const HistoryConfig c = test::chainedConfig(dir, "sqlite");
  test::writeChained(c, 0, 40);
  test::writeChained(c, 40, 10);  // a new writer reads the chain's end back from the file
  auto keys = loadChainKeys(c.chain_key_file, false);
  ASSERT_TRUE(keys.ok());
  const auto rows = sqliteQuery(c.path,
                                "SELECT chain_seq, chain_key, chain_hash, sql_text, id "
                                "FROM pgwarden_history ORDER BY id");
  ASSERT_EQ(rows.size(), 50u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], std::to_string(i + 1));
    EXPECT_EQ(rows[i][1], keys->current().id);
    ChainHash stored{};
    EXPECT_TRUE(parseChainHash(rows[i][2], &stored)) << rows[i][2];
  }
  // That each hash is made from the previous one and the fields is verify_test.cpp's.
  EXPECT_NE(rows[0][2], rows[1][2]);
}

TEST(Chainer, OffWithoutAKeyFile) {
  TempDir dir;
  HistoryConfig c = test::chainedConfig(dir, "sqlite");
  c.chain = false;
  test::writeChained(c, 0, 3);
  EXPECT_EQ(sqliteQuery(c.path,
                        "SELECT count(*) FROM pgwarden_history WHERE chain_seq = 0 AND "
                        "chain_hash = ''")[0][0],
            "3");
  EXPECT_FALSE(std::filesystem::exists(c.chain_key_file));
}

}  // namespace
}  // namespace pgwarden::history
