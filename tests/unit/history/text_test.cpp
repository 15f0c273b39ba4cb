// history: UTF-8 repair and truncation, JSON escaping of arbitrary bytes, and the libpg_query
// fingerprint and normalization the history relies on.
#include "history/text.h"

#include <gtest/gtest.h>
#include <pg_query.h>

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "history/json.h"

namespace pgwarden::history {
namespace {

TEST(Utf8, ValidAndInvalid) {
  EXPECT_TRUE(isValidUtf8("plain ascii"));
  EXPECT_TRUE(isValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(isValidUtf8("\xC3"));                 // lead byte without continuation
  EXPECT_FALSE(isValidUtf8("\x80"));                 // lone continuation
  EXPECT_FALSE(isValidUtf8("\xC0\xAF"));             // overlong '/'
  EXPECT_FALSE(isValidUtf8("\xE0\x80\xAF"));         // overlong
  EXPECT_FALSE(isValidUtf8("\xED\xA0\x80"));         // surrogate U+D800
  EXPECT_FALSE(isValidUtf8("\xF4\x90\x80\x80"));     // above U+10FFFF
  EXPECT_FALSE(isValidUtf8("\xFF"));
}

TEST(Utf8, SanitizeReplacesInvalidBytesAndDropsNul) {
  std::string s = std::string("a\xFF") + '\0' + "b\xC3\xA9\xE2\x82";
  EXPECT_TRUE(sanitizeUtf8(s));
  EXPECT_EQ(s, "a\xEF\xBF\xBD" "b\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(isValidUtf8(s));
  std::string clean = "SELECT 'caf\xC3\xA9'";
  EXPECT_FALSE(sanitizeUtf8(clean));
  EXPECT_EQ(clean, "SELECT 'caf\xC3\xA9'");
}

TEST(Utf8, TruncateNeverSplitsACharacter) {
  // "é" is 2 bytes, "€" 3, "😀" 4: cut at every length and check the result.
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z";  // 1+2+3+4+1 = 11 bytes
  const size_t expected[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 11, 11};
  for (size_t max = 0; max <= 12; ++max) {
    std::string s = text;
    const bool cut = truncateUtf8(s, max);
    EXPECT_EQ(s.size(), expected[max]) << "max " << max;
    EXPECT_EQ(cut, max < text.size()) << "max " << max;
    EXPECT_TRUE(isValidUtf8(s)) << "max " << max;
    EXPECT_EQ(text.compare(0, s.size(), s), 0);
  }
}

TEST(Utf8, TruncateAsciiExactly) {
  std::string s(5000, 'x');
  EXPECT_TRUE(truncateUtf8(s, 4096));
  EXPECT_EQ(s.size(), 4096u);
  EXPECT_FALSE(truncateUtf8(s, 4096));
}

std::string jsonString(std::string_view s) {
  std::string out;
  appendJsonString(out, s);
  return out;
}

TEST(Json, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(jsonString("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(jsonString("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(jsonString(std::string("\x01\x1f\x7f", 3)), R"("\u0001\u001f\u007f")");
  EXPECT_EQ(jsonString(std::string("a\0b", 3)), R"("a\u0000b")");
  EXPECT_EQ(jsonString("caf\xC3\xA9"), "\"caf\xC3\xA9\"");
  EXPECT_EQ(jsonString("bad \xFF\xC3"), R"("bad \ufffd\ufffd")");
  // Escapes between runs of plain text, at either end and side by side.
  EXPECT_EQ(jsonString("\"start, mid\\dle\n\"end"), R"("\"start, mid\\dle\n\"end")");
  EXPECT_EQ(jsonString("The result is capped at 1000 rows."), "\"The result is capped at 1000 rows.\"");
  EXPECT_EQ(jsonString(""), "\"\"");
}

TEST(Json, AnyBytesGiveValidJson) {
  std::mt19937 rng(20240501);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 2000; ++round) {
    std::string s(static_cast<size_t>(round % 64), '\0');
    for (char& c : s) c = static_cast<char>(byte(rng));
    const std::string json = jsonString(s);
    ASSERT_TRUE(nlohmann::json::accept(json)) << json;
    // Valid input survives the round trip unchanged.
    if (isValidUtf8(s)) {
      EXPECT_EQ(nlohmann::json::parse(json).get<std::string>(), s);
    }
  }
}

TEST(Json, WriterPlacesCommas) {
  JsonWriter w;
  w.beginObject().key("a").number(1).key("b").beginArray().string("x").boolean(true).null()
      .endArray().key("c").raw("{\"d\":[]}").endObject();
  EXPECT_EQ(w.str(), R"({"a":1,"b":["x",true,null],"c":{"d":[]}})");
  EXPECT_TRUE(isJsonValue(w.str()));
  EXPECT_FALSE(isJsonValue("[{\"guard\": "));
  EXPECT_FALSE(isJsonValue("not json"));
}

// isJsonValue answers without nlohmann for the daemon's own guard_actions; whatever path it takes,
// the answer must be nlohmann's.
TEST(Json, IsJsonValueAgreesWithNlohmann) {
  for (const char* text :
       {"[]", " [ ] ", "{}", "[{\"guard\":\"row_limit\",\"action\":\"rewrite\",\"code\":\"ROWS_CAPPED\",\"reason\":\"x\"}]",
        "\"a\\\"b\\n\"", "0", "-0", "12.5", "-3.25", "1e5", "1E+5", "01", "1.", ".5", "-", "+1", "1.5e", "true",
        "false", "null", "tru", "nul", "truex", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{a:1}",
        "[1] [2]", "\"\\u00e9\"", "\"\\ud800\"", "\"\\x\"", "\"tab\there\"", "\"\xc3\xa9\"", "\"\xff\"",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "[[[1]]", "[[[1]]]]",
        "123456789012345678901234567890", "", " ", "\"open", "{\"a\":[1,{\"b\":null}],\"c\":\"d\"}"}) {
    EXPECT_EQ(isJsonValue(text), nlohmann::json::accept(std::string_view(text))) << text;
  }
}

TEST(Sql, FingerprintGroupsLiteralsAndSpacingButNotTables) {
  const auto late = fingerprintSql("SELECT * FROM orders WHERE status = 'late'");
  const auto delayed = fingerprintSql("select *\n  from orders where status='DELAYED' -- again");
  const auto commented = fingerprintSql("/* retry */ SELECT * FROM orders WHERE STATUS = 'x'");
  const auto users = fingerprintSql("SELECT * FROM users WHERE status = 'late'");
  ASSERT_TRUE(late.ok()) << late.error();
  ASSERT_TRUE(delayed.ok()) << delayed.error();
  ASSERT_TRUE(commented.ok());
  ASSERT_TRUE(users.ok());
  EXPECT_EQ(late.value().size(), 16u);
  EXPECT_EQ(*late, *delayed);
  EXPECT_EQ(*late, *commented);
  EXPECT_NE(*late, *users);

  // Quoted identifiers: "orders" and "users" stay apart too.
  const auto q_orders = fingerprintSql(R"(SELECT * FROM "orders" WHERE status = 'late')");
  const auto q_users = fingerprintSql(R"(SELECT * FROM "users" WHERE status='DELAYED')");
  ASSERT_TRUE(q_orders.ok());
  ASSERT_TRUE(q_users.ok());
  EXPECT_NE(*q_orders, *q_users);
  EXPECT_EQ(*q_orders, *late);

  EXPECT_FALSE(fingerprintSql("SELEC oops FROM").ok());
}

TEST(Sql, NormalizeReplacesLiterals) {
  const auto n = normalizeSql("SELECT * FROM orders WHERE status = 'late' AND id = 42");
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(*n, "SELECT * FROM orders WHERE status = $1 AND id = $2");
  EXPECT_FALSE(normalizeSql("SELEC 'secret' FROM").ok());
}

TEST(Time, FormatsUtcWithMicroseconds) {
  EXPECT_EQ(formatTimestampUs(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(formatTimestampUs(1714564800123456), "2024-05-01T12:00:00.123456Z");
  EXPECT_EQ(formatTimestampUs(-1), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(formatTimestampUs(INT64_MAX), "9999-12-31T23:59:59.999999Z");
}

// The hand-written date arithmetic against gmtime_r, over the whole range the text can hold.
TEST(Time, AgreesWithGmtimeOverTheWholeRange) {
  std::mt19937_64 rng(7);
  constexpr int64_t kMinUs = -62135596800LL * 1000000;
  constexpr int64_t kMaxUs = 253402300799LL * 1000000 + 999999;
  std::uniform_int_distribution<int64_t> any(kMinUs, kMaxUs);
  std::vector<int64_t> cases{kMinUs, kMaxUs, 951782400000000 /* 2000-02-29 */,
                             -2203891200000000 /* 1900-03-01 */, 4107542400000000 /* 2100-03-01 */};
  for (int i = 0; i < 20000; ++i) cases.push_back(any(rng));
  for (const int64_t us : cases) {
    const int64_t secs = us >= 0 ? us / 1000000 : -((-us + 999999) / 1000000);
    const time_t t = static_cast<time_t>(secs);
    struct tm tm {};
    gmtime_r(&t, &tm);
    char want[64];
    std::snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(us - secs * 1000000));
    ASSERT_EQ(formatTimestampUs(us), want) << us;
  }
}

TEST(Utf8, TheWordAtATimePathStopsAtNulAndNonAscii) {
  for (size_t at = 0; at < 24; ++at) {
    std::string nul(24, 'a');
    nul[at] = '\0';
    EXPECT_TRUE(sanitizeUtf8(nul)) << at;
    EXPECT_EQ(nul, std::string(23, 'a')) << at;
    std::string bad(24, 'a');
    bad[at] = '\xff';
    EXPECT_TRUE(sanitizeUtf8(bad)) << at;
    EXPECT_EQ(bad, std::string(at, 'a') + "\xEF\xBF\xBD" + std::string(23 - at, 'a')) << at;
    std::string ok = std::string(at, 'a') + "\xC3\xA9" + std::string(24 - at, 'a');
    EXPECT_FALSE(sanitizeUtf8(ok)) << at;
  }
}

}  // namespace
}  // namespace pgwarden::history
