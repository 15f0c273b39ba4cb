// The log escaper: what a peer can put in a value never leaves the line it was logged on, never
// puts a NUL or invalid UTF-8 into the log, and is cut to a bound with its true size named.
#include "common/log_text.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace pgwarden {
namespace {

using namespace std::string_literals;

TEST(LogText, PlainTextPassesUnchanged) {
  EXPECT_EQ(escapeLogText("agent"), "agent");
  EXPECT_EQ(escapeLogText("SELECT 1 FROM t WHERE a = 'x'"), "SELECT 1 FROM t WHERE a = 'x'");
  EXPECT_EQ(escapeLogText(""), "");
}

TEST(LogText, ControlCharactersAreEscaped) {
  EXPECT_EQ(escapeLogText("a\nb"), "a\\nb");
  EXPECT_EQ(escapeLogText("a\rb\tc"), "a\\rb\\tc");
  EXPECT_EQ(escapeLogText("a\0b"s), "a\\x00b");
  EXPECT_EQ(escapeLogText("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(escapeLogText("\x7f"), "\\x7f");
  EXPECT_EQ(escapeLogText("\x01\x1f"), "\\x01\\x1f");
}

TEST(LogText, ForgedLineStaysOnItsLine) {
  const std::string user = "nobody\n2026-12-01 06:00:00.000 [error] FORGED LINE";
  const std::string out = escapeLogText(user);
  EXPECT_EQ(out.find('\n'), std::string::npos);
  EXPECT_EQ(out, "nobody\\n2026-12-01 06:00:00.000 [error] FORGED LINE");
}

TEST(LogText, BackslashIsDoubledSoEscapesCannotBeFaked) {
  // A client that types a literal "\n" must not look like one that sent a newline.
  EXPECT_EQ(escapeLogText("a\\nb"), "a\\\\nb");
  EXPECT_NE(escapeLogText("a\\nb"), escapeLogText("a\nb"));
  // The sink's mode leaves backslashes alone (call sites already doubled theirs).
  EXPECT_EQ(escapeLogText("a\\n\nb", 0, LogEscape::kControlsOnly), "a\\n\\nb");
}

TEST(LogText, ValidUtf8PassesInvalidBytesAreEscaped) {
  EXPECT_EQ(escapeLogText("grüße 日本 🐘"), "grüße 日本 🐘");
  EXPECT_EQ(escapeLogText("a\xff"
                          "b"),
            "a\\xffb");
  EXPECT_EQ(escapeLogText("\xc3"), "\\xc3");                             // truncated sequence
  EXPECT_EQ(escapeLogText("\xc3(x"), "\\xc3(x");                         // bad continuation
  EXPECT_EQ(escapeLogText("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(escapeLogText("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");           // overlong, 3 bytes
  EXPECT_EQ(escapeLogText("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // UTF-16 surrogate
  EXPECT_EQ(escapeLogText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(escapeLogText("\x80"), "\\x80");                             // lone continuation byte
}

TEST(LogText, SeparatorsAndBidiControlsAreEscaped) {
  EXPECT_EQ(escapeLogText("a\u2028b"), "a\\u{2028}b");  // line separator
  EXPECT_EQ(escapeLogText("a\u2029b"), "a\\u{2029}b");
  EXPECT_EQ(escapeLogText("a\u202eb"), "a\\u{202e}b");  // right-to-left override
  EXPECT_EQ(escapeLogText("a\u2066b"), "a\\u{2066}b");
  EXPECT_EQ(escapeLogText("a\u0085b"), "a\\u{85}b");  // NEL, a C1 control
}

TEST(LogText, LongValuesAreCutWithTheirSize) {
  const std::string sql(1000, 'x');
  EXPECT_EQ(escapeLogText(sql, 10), "xxxxxxxxxx...(1000 bytes)");
  EXPECT_EQ(escapeLogText(std::string(10, 'x'), 10), std::string(10, 'x'));  // fits: no marker
  // The cap bounds the escaped form: 300 NULs do not become 1200 bytes.
  const std::string out = escapeLogText(std::string(300, '\0'));
  EXPECT_LE(out.size(), kLogTextMaxBytes + 20);
  EXPECT_NE(out.find("...(300 bytes)"), std::string::npos);
  // Never cut inside an escape or a multi-byte character.
  EXPECT_EQ(escapeLogText("ab\n", 3), "ab...(3 bytes)");
  EXPECT_EQ(escapeLogText("aé", 2), "a...(3 bytes)");
  EXPECT_EQ(escapeLogText(sql, 0), sql);  // 0: no cap
}

TEST(LogText, NeedsEscapeMatchesTheSinkMode) {
  EXPECT_FALSE(needsLogEscape("plain line with a \\ backslash and ünïcode"));
  EXPECT_TRUE(needsLogEscape("two\nlines"));
  EXPECT_TRUE(needsLogEscape("nul\0"s));
  EXPECT_TRUE(needsLogEscape("bad \xff byte"));
  EXPECT_TRUE(needsLogEscape("sep\u2028"));
}

TEST(LogText, FormatsThroughFmt) {
  const std::string user = "x\ny";
  EXPECT_EQ(fmt::format("user={}", logsafe(user)), "user=x\\ny");
  EXPECT_EQ(fmt::format("type '{}'", logsafe('\0')), "type '\\x00'");
  EXPECT_EQ(fmt::format("type '{}'", logsafe('Q')), "type 'Q'");
  EXPECT_EQ(fmt::format("{}", logsafe(std::string(50, 'a'), 4)), "aaaa...(50 bytes)");
}

}  // namespace
}  // namespace pgwarden
