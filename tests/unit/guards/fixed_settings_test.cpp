// The settings no policy group may change: standard_conforming_strings and client_encoding, which
// decide how the server splits a text, and pg_settings, whose writes are set_config() calls. Each
// is refused in a group with no guards at all, as in the example's guarded group, by every way
// of changing it; setting the value pgwarden reads under passes.
#include "guards/fixed_settings.h"

#include <gtest/gtest.h>

#include "guard_test_util.h"
#include "guards/codes.h"

namespace pgwarden::guards {
namespace {

using test::evaluate;
using test::exampleGroups;
using test::groupsFromYaml;

const PolicyGroup& noGuards() {
  static const PolicyMap groups = groupsFromYaml("open:\n  guards: []\n");
  return *groups.at("open");
}

struct FixedCase {
  const char* sql;
  const char* setting;
};

class FixedSettingRefused : public ::testing::TestWithParam<FixedCase> {};
TEST_P(FixedSettingRefused, InEveryGroup) {
  const auto [sql, setting] = GetParam();
  for (const PolicyGroup* g : {&noGuards(), exampleGroups().at("agents").get()}) {
    const Decision d = evaluate(*g, sql, nullptr);
    ASSERT_TRUE(d.denied) << g->name() << ": " << sql;
    EXPECT_EQ(d.deny.code, codes::kProtectedSetting) << sql;
    EXPECT_EQ(d.deny.sqlstate, "42501");
    EXPECT_EQ(d.deny.guard, "fixed_settings");
    EXPECT_NE(d.deny.detail.find(std::string("\"setting\":\"") + setting + "\""), std::string::npos)
        << d.deny.detail;
    EXPECT_NE(d.deny.detail.find("next_step"), std::string::npos);
    EXPECT_FALSE(d.deny.hint.empty());
  }
}
INSTANTIATE_TEST_SUITE_P(
    FixedSettings, FixedSettingRefused,
    ::testing::Values(
        FixedCase{"SET standard_conforming_strings = off", "standard_conforming_strings"},
        FixedCase{"set standard_conforming_strings to 'false'", "standard_conforming_strings"},
        FixedCase{"SET LOCAL standard_conforming_strings = off", "standard_conforming_strings"},
        FixedCase{"SET SESSION standard_conforming_strings TO DEFAULT",
                  "standard_conforming_strings"},
        FixedCase{"RESET standard_conforming_strings", "standard_conforming_strings"},
        FixedCase{"SELECT set_config('standard_conforming_strings', 'off', false)",
                  "standard_conforming_strings"},
        FixedCase{"SELECT pg_catalog.set_config('Standard_Conforming_Strings', 'on', true)",
                  "standard_conforming_strings"},
        FixedCase{"SELECT 1; SET standard_conforming_strings = off", "standard_conforming_strings"},
        FixedCase{"SET client_encoding = 'SJIS'", "client_encoding"},
        FixedCase{"SET client_encoding TO latin1", "client_encoding"},
        FixedCase{"SET NAMES 'GBK'", "client_encoding"},
        FixedCase{"SET client_encoding TO DEFAULT", "client_encoding"},
        FixedCase{"RESET client_encoding", "client_encoding"},
        FixedCase{"SELECT set_config('client_encoding', 'BIG5', false)", "client_encoding"},
        FixedCase{"SELECT set_config(name, 'off', false) FROM pg_settings", "*"},
        FixedCase{"UPDATE pg_settings SET setting = '0' WHERE name IN ('statement_timeout', "
                  "'lock_timeout')",
                  "pg_settings"},
        FixedCase{"UPDATE pg_catalog.pg_settings SET setting = 'off' WHERE name = "
                  "'standard_conforming_strings'",
                  "pg_settings"},
        FixedCase{"INSERT INTO pg_settings (name, setting) VALUES ('work_mem', '1MB')",
                  "pg_settings"},
        FixedCase{"DELETE FROM pg_settings WHERE name = 'work_mem'", "pg_settings"},
        FixedCase{"WITH u AS (UPDATE pg_settings SET setting = '0' WHERE name = 'lock_timeout' "
                  "RETURNING 1) "
                  "SELECT * FROM u",
                  "pg_settings"}));

class FixedSettingPasses : public ::testing::TestWithParam<const char*> {};
TEST_P(FixedSettingPasses, InAGroupWithoutGuards) {
  const Decision d = evaluate(noGuards(), GetParam(), nullptr);
  EXPECT_FALSE(d.denied) << GetParam() << ": " << d.deny.message;
}
INSTANTIATE_TEST_SUITE_P(
    FixedSettings, FixedSettingPasses,
    ::testing::Values("SET standard_conforming_strings = on",
                      "SET standard_conforming_strings TO true", "SET client_encoding = 'UTF8'",
                      "SET client_encoding TO 'utf-8'", "SET NAMES 'unicode'",
                      "SHOW client_encoding", "SELECT name, setting FROM pg_settings",
                      "SELECT set_config('work_mem', '64MB', false)", "SET work_mem = '64MB'",
                      "RESET ALL", "UPDATE my_settings SET setting = '0' WHERE name = 'x'"));

TEST(FixedSettings, ServerReportsOnlyTheValuesPgwardenReadsUnder) {
  EXPECT_TRUE(serverReportAccepted("standard_conforming_strings", "on"));
  EXPECT_FALSE(serverReportAccepted("standard_conforming_strings", "off"));
  EXPECT_TRUE(serverReportAccepted("client_encoding", "UTF8"));
  EXPECT_FALSE(serverReportAccepted("client_encoding", "SJIS"));
  EXPECT_FALSE(serverReportAccepted("client_encoding", "SQL_ASCII"));
  EXPECT_TRUE(serverReportAccepted("TimeZone", "Asia/Tokyo"));
}

TEST(FixedSettings, Utf8SpellingsAsTheServerCleansThem) {
  for (const char* v : {"UTF8", "utf8", "utf-8", "UTF_8", "Unicode"})
    EXPECT_TRUE(isUtf8EncodingName(v)) << v;
  for (const char* v : {"SJIS", "LATIN1", "SQL_ASCII", "", "utf16", "auto"})
    EXPECT_FALSE(isUtf8EncodingName(v)) << v;
}

// A text that is not valid UTF-8 gets the server's answer: 22021 and its message, naming the bytes
// as the server does; never a message about nesting.
TEST(FixedSettings, InvalidUtf8IsAnsweredAsTheServerAnswersIt) {
  struct Text {
    std::string sql;
    const char* bytes;
  };
  for (const Text& t :
       {Text{"select 'caf\xe9'", "0xe9 0x27"}, Text{"select 1 -- \xc3", "0xc3"},
        Text{"select '\xc0\xaf'", "0xc0 0xaf"}, Text{"select '\xed\xa0\x80'", "0xed 0xa0 0x80"},
        Text{"select E'\xe0\xa0\x81\\'", "0xe0 0xa0 0x81"} /* valid: see below */}) {
    const std::string message = analysis::invalidUtf8Message(t.sql);
    if (t.sql.find("\xe0\xa0\x81") != std::string::npos) {
      EXPECT_EQ(message, "") << "e0 a0 81 is one valid character";
      continue;
    }
    EXPECT_EQ(message, std::string("invalid byte sequence for encoding \"UTF8\": ") + t.bytes);
    const Decision d = evaluate(noGuards(), t.sql, nullptr);
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, codes::kInvalidEncoding);
    EXPECT_EQ(d.deny.sqlstate, "22021");
    EXPECT_EQ(d.deny.message, message);
    EXPECT_EQ(d.deny.message.find("nested"), std::string::npos);
  }
  EXPECT_EQ(analysis::invalidUtf8Message("select 'café', '日本', '\xf0\x9f\x98\x80'"), "");
}

}  // namespace
}  // namespace pgwarden::guards
