// Tool-schema patterns on PCRE2: ECMA-262's spelling, compile errors with their offset, and the
// limits that end a runaway match.
#include "mcp/json_pattern.h"

#include <gtest/gtest.h>

#include <string>

namespace pgwarden::mcp {
namespace {

using Outcome = JsonPattern::Outcome;

JsonPattern compiled(std::string_view source) {
  auto p = JsonPattern::compile(source);
  EXPECT_TRUE(p.ok()) << p.error();
  return std::move(p).value();
}

TEST(JsonPattern, SearchesUnanchoredLikeJsonSchema) {
  EXPECT_EQ(compiled("[0-9]+").search("abc123"), Outcome::kMatch);
  EXPECT_EQ(compiled("^[0-9]+$").search("abc123"), Outcome::kNoMatch);
  EXPECT_EQ(compiled("^[A-Z]{3}$").search("AMS"), Outcome::kMatch);
}

TEST(JsonPattern, SpeaksEcmaScript) {
  // \uXXXX is a code point (Perl would refuse \u); `$` does not match before a final newline.
  EXPECT_EQ(compiled("^\\u00e9$").search("é"), Outcome::kMatch);
  EXPECT_EQ(compiled("^abc$").search("abc\n"), Outcome::kNoMatch);
  // \d and \w are ASCII, and `.` is one code point of UTF-8 text.
  EXPECT_EQ(compiled("^\\d$").search("٣"), Outcome::kNoMatch);
  EXPECT_EQ(compiled("^.$").search("é"), Outcome::kMatch);
}

TEST(JsonPattern, ACompileErrorSaysWhatAndWhere) {
  auto p = JsonPattern::compile("([a-z");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("at offset 5"), std::string::npos) << p.error();
}

// ^(a+)+$ against forty a's and a '!' would try 2^40 splits: the match limit ends it.
TEST(JsonPattern, CatastrophicBacktrackingEndsAtTheLimit) {
  const JsonPattern p = compiled("^(a+)+$");
  EXPECT_EQ(p.search(std::string(40, 'a')), Outcome::kMatch);
  EXPECT_EQ(p.search(std::string(40, 'a') + "!"), Outcome::kLimit);
  // Nested quantifiers over alternatives go the same way.
  EXPECT_EQ(compiled("^(a|a)*$").search(std::string(40, 'a') + "!"), Outcome::kLimit);
}

// The limits leave room for what values under a pattern may be: 1,024 characters through a
// capturing repetition.
TEST(JsonPattern, OrdinaryPatternsOnLongValuesStayUnderTheLimits) {
  EXPECT_EQ(compiled("^(a|b)*$").search(std::string(1024, 'a')), Outcome::kMatch);
  EXPECT_EQ(compiled("^([a-z0-9]+-?)*$").search(std::string(1024, 'x')), Outcome::kMatch);
}

TEST(JsonPattern, InvalidUtf8IsAnErrorNotACrash) {
  EXPECT_EQ(compiled("a").search("\xff\xfe"), Outcome::kBadSubject);
}

}  // namespace
}  // namespace pgwarden::mcp
