// analysis: the shape lexer. Every literal class with its decoded value and category, what must
// not be taken for a literal (identifiers with digits, quoted identifiers, parameters, comments),
// and every text the lexer must refuse rather than guess about.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "analysis/shape.h"

namespace pgwarden::guards {
namespace {

analysis::Shape lexOk(const std::string& sql) {
  analysis::Shape s;
  EXPECT_TRUE(analysis::lexShape(sql, s)) << sql;
  return s;
}

bool refused(const std::string& sql) {
  analysis::Shape s;
  return !analysis::lexShape(sql, s);
}

// One literal expected: its class, decoded value and category.
void expectOne(const std::string& sql, analysis::LiteralClass cls, const std::string& value,
               analysis::ValueCategory cat = analysis::ValueCategory::kPlain) {
  SCOPED_TRACE(sql);
  const analysis::Shape s = lexOk(sql);
  ASSERT_EQ(s.literals.size(), 1u);
  EXPECT_EQ(s.literals[0].cls, cls);
  EXPECT_EQ(s.literals[0].value, value);
  EXPECT_EQ(s.literals[0].category, cat);
}

TEST(ShapeLexer, Integers) {
  expectOne("SELECT 42", analysis::LiteralClass::kInteger, "42", analysis::ValueCategory::kSmall);
  expectOne("SELECT 0", analysis::LiteralClass::kInteger, "0", analysis::ValueCategory::kZero);
  expectOne("SELECT 100", analysis::LiteralClass::kInteger, "100");
  expectOne("SELECT 2147483647", analysis::LiteralClass::kInteger, "2147483647");
  expectOne("SELECT 2147483648", analysis::LiteralClass::kBigInteger, "2147483648");
  expectOne("SELECT 99999999999999999999999", analysis::LiteralClass::kBigInteger,
            "99999999999999999999999");
  const analysis::Shape s = lexOk("SELECT abalance FROM pgbench_accounts WHERE aid = 48213;");
  ASSERT_EQ(s.literals.size(), 1u);
  EXPECT_EQ(s.literals[0].offset, 50u);
  EXPECT_EQ(s.literals[0].length, 5u);
  EXPECT_EQ(s.literals[0].number, 48213);
  // An integer's value, read digit by digit, is the double the decimal text rounds to.
  for (const char* digits : {"1", "99", "2147483647", "2147483648", "9007199254740993",
                             "999999999999999999", "1000000000000000000", "12345678901234567891"}) {
    const analysis::Shape d = lexOk(std::string("SELECT ") + digits);
    ASSERT_EQ(d.literals.size(), 1u) << digits;
    EXPECT_EQ(d.literals[0].number, std::strtod(digits, nullptr)) << digits;
  }
  expectOne("SELECT 9999999999", analysis::LiteralClass::kBigInteger, "9999999999");
  expectOne("SELECT 999999999999999999", analysis::LiteralClass::kBigInteger,
            "999999999999999999");
}

TEST(ShapeLexer, Floats) {
  expectOne("SELECT 1.5", analysis::LiteralClass::kFloat, "1.5", analysis::ValueCategory::kSmall);
  expectOne("SELECT .5", analysis::LiteralClass::kFloat, ".5", analysis::ValueCategory::kSmall);
  expectOne("SELECT 1.", analysis::LiteralClass::kFloat, "1.", analysis::ValueCategory::kSmall);
  expectOne("SELECT 1e10", analysis::LiteralClass::kFloat, "1e10");
  expectOne("SELECT 1.5E-3", analysis::LiteralClass::kFloat, "1.5E-3",
            analysis::ValueCategory::kSmall);
  expectOne("SELECT 2e+5", analysis::LiteralClass::kFloat, "2e+5");
  expectOne("SELECT 0.0", analysis::LiteralClass::kFloat, "0.0", analysis::ValueCategory::kZero);
}

TEST(ShapeLexer, Strings) {
  expectOne("SELECT 'abc'", analysis::LiteralClass::kString, "abc");
  expectOne("SELECT 'it''s'", analysis::LiteralClass::kString, "it's");
  expectOne("SELECT 'ünïcødé'", analysis::LiteralClass::kString, "ünïcødé");
  expectOne("SELECT ''", analysis::LiteralClass::kString, "", analysis::ValueCategory::kEmpty);
  expectOne("SELECT '%%'", analysis::LiteralClass::kString, "%%",
            analysis::ValueCategory::kPercents);
  expectOne("SELECT '.*'", analysis::LiteralClass::kString, ".*",
            analysis::ValueCategory::kDotStar);
  expectOne("SELECT 'a%'", analysis::LiteralClass::kString, "a%",
            analysis::ValueCategory::kWildcard);
  expectOne("SELECT 'a_b'", analysis::LiteralClass::kString, "a_b",
            analysis::ValueCategory::kWildcard);
  expectOne("SELECT E'a\\\\b\\'c'", analysis::LiteralClass::kEString, "a\\b'c",
            analysis::ValueCategory::kWildcard);
  expectOne("SELECT e'x''y'", analysis::LiteralClass::kEString, "x'y");
  expectOne("SELECT U&'abc'", analysis::LiteralClass::kUString, "abc");
  expectOne("SELECT B'0101'", analysis::LiteralClass::kBitB, "b0101");
  expectOne("SELECT x'1F'", analysis::LiteralClass::kBitX, "x1F");
  expectOne("SELECT $$a'b$$", analysis::LiteralClass::kDollar, "a'b");
  expectOne("SELECT $fn$ x $$ y $fn$", analysis::LiteralClass::kDollar, " x $$ y ");
  expectOne("SELECT date '2024-01-01'", analysis::LiteralClass::kString, "2024-01-01");
  expectOne("SELECT '1'::int", analysis::LiteralClass::kString, "1");
}

TEST(ShapeLexer, NotLiterals) {
  for (const char* sql : {
           "SELECT t1.c2 FROM t1 JOIN t2 ON t1.id = t2.id",
           "SELECT \"col 1\", \"a\"\"b9\" FROM \"T2\"",
           "SELECT a$1, x1y2 FROM tab_3 WHERE id = $1 AND v > $12",
           "SELECT e, b, x, u, n FROM t",
           "SELECT U&\"d\\0061t\" FROM t",
           "SELECT c -- 5 and '6'\nFROM t",
           "SELECT /* 1 /* '2' */ 3 */ c FROM t",
           "SELECT a::text, b[c : d], f(x := y) FROM t",
           "SELECT a <-> b, c !~~* d, e @> f, g ||h FROM t",
       }) {
    SCOPED_TRACE(sql);
    const analysis::Shape s = lexOk(sql);
    EXPECT_TRUE(s.literals.empty());
    EXPECT_EQ(s.key, sql);
  }
  // The slice bounds are the only literals there; `:d` could be a psql variable.
  EXPECT_TRUE(refused("SELECT b[c:d] FROM t"));
  EXPECT_EQ(lexOk("SELECT b[1:2] FROM t").literals.size(), 2u);
}

TEST(ShapeLexer, NegativeNumbersKeepTheirMinus) {
  const analysis::Shape a = lexOk("SELECT x FROM t WHERE y = -5");
  const analysis::Shape b = lexOk("SELECT x FROM t WHERE y = 5");
  ASSERT_EQ(a.literals.size(), 1u);
  EXPECT_EQ(a.literals[0].value, "5");
  EXPECT_NE(a.key, b.key);
  EXPECT_NE(a.key.find("= -"), std::string::npos);
}

TEST(ShapeLexer, KeyKeepsClassCategoryAndEquality) {
  auto key = [](const std::string& sql) { return lexOk(sql).key; };
  // Same shape: another value of the same class and category.
  EXPECT_EQ(key("SELECT abalance FROM pgbench_accounts WHERE aid = 48213"),
            key("SELECT abalance FROM pgbench_accounts WHERE aid = 100"));
  EXPECT_EQ(key("SELECT * FROM t WHERE a = 'x' AND b = 'y'"),
            key("SELECT * FROM t WHERE a = 'it''s' AND b = '\xc3\xa9'"));
  // Class changes the parse tree.
  EXPECT_NE(key("SELECT * FROM t WHERE a = 1000"), key("SELECT * FROM t WHERE a = 1000.0"));
  EXPECT_NE(key("SELECT * FROM t WHERE a = 1000"), key("SELECT * FROM t WHERE a = '1000'"));
  EXPECT_NE(key("SELECT * FROM t WHERE a = 1000"), key("SELECT * FROM t WHERE a = 3000000000"));
  EXPECT_NE(key("SELECT * FROM t WHERE a = 'x'"), key("SELECT * FROM t WHERE a = E'x'"));
  EXPECT_NE(key("SELECT * FROM t WHERE a = 'x'"), key("SELECT * FROM t WHERE a = $$x$$"));
  EXPECT_NE(key("SELECT B'1'"), key("SELECT X'1'"));
  // Categories the walker's decisions depend on.
  EXPECT_NE(key("SELECT * FROM t LIMIT 0"), key("SELECT * FROM t LIMIT 5"));
  EXPECT_NE(key("SELECT * FROM t LIMIT 5"), key("SELECT * FROM t LIMIT 500"));
  EXPECT_NE(key("SELECT * FROM t WHERE a LIKE 'a%'"), key("SELECT * FROM t WHERE a LIKE '%'"));
  EXPECT_NE(key("SELECT * FROM t WHERE a LIKE 'ab'"), key("SELECT * FROM t WHERE a LIKE 'a%'"));
  EXPECT_NE(key("SELECT * FROM t WHERE a ~ 'x'"), key("SELECT * FROM t WHERE a ~ '.*'"));
  EXPECT_NE(key("SELECT * FROM t WHERE a ~ 'x'"), key("SELECT * FROM t WHERE a ~ ''"));
  // Equal constants share a group: 1 = 1 is not the shape of 1 = 2.
  EXPECT_NE(key("SELECT * FROM t WHERE 1000 = 1000"), key("SELECT * FROM t WHERE 1000 = 2000"));
  EXPECT_NE(key("SELECT * FROM t WHERE 'a' = 'a'"), key("SELECT * FROM t WHERE 'a' = 'b'"));
  // Equal across string syntaxes too (both are String nodes), but not across node types.
  const analysis::Shape differ = lexOk("SELECT * FROM t WHERE 'a' = E'b'");
  ASSERT_EQ(differ.literals.size(), 2u);
  EXPECT_NE(differ.literals[0].group, differ.literals[1].group);
  const analysis::Shape same = lexOk("SELECT * FROM t WHERE 'a' = E'a'");
  ASSERT_EQ(same.literals.size(), 2u);
  EXPECT_EQ(same.literals[0].group, same.literals[1].group);
  const analysis::Shape mixed = lexOk("SELECT * FROM t WHERE '1000' = 1000");
  ASSERT_EQ(mixed.literals.size(), 2u);
  EXPECT_NE(mixed.literals[0].group, mixed.literals[1].group);
}

TEST(ShapeLexer, RefusesWhatItIsNotSureAbout) {
  for (const std::string& sql : std::vector<std::string>{
           "SELECT 'abc",                       // unterminated string
           "SELECT E'abc",                      // unterminated E string
           "SELECT \"abc",                      // unterminated identifier
           "SELECT \"\" FROM t",                // zero-length identifier
           "SELECT 1 /* unterminated",          // unterminated comment
           "SELECT 1 /* /* */",                 // nested, not closed
           "SELECT $$abc",                      // unterminated dollar quote
           "SELECT $a$abc$b$",                  // wrong closing tag
           "SELECT 'a\\b'",                     // backslash in a plain string
           "SELECT E'a\\nb'",                   // E'' escapes other than \\ and \'
           "SELECT E'\\x41'",
           "SELECT U&'\\0061'",                 // U& escapes
           "SELECT U&'a!0061' UESCAPE '!'",     // UESCAPE
           "SELECT U&\"a!0061\" UESCAPE '!' FROM t",
           "SELECT N'abc'",                     // national character
           "SELECT 'a'\n'b'",                   // one constant to PostgreSQL
           "SELECT 'a' -- c\n 'b'",
           "SELECT B'012'",                     // not a bit string
           "SELECT X'0G'",
           "SELECT :var",                       // psql variables
           "SELECT :'var'",
           "SELECT :\"var\"",
           "SELECT 0x1F",                       // non-decimal and underscored numbers
           "SELECT 0o17",
           "SELECT 1_000",
           "SELECT 007",                        // leading zeros
           "SELECT 1e",                         // trailing junk
           "SELECT 1e+",
           "SELECT 123abc",
           "SELECT 1..2",
           "SELECT 1.5.3",
           "SELECT $1abc",
           "SELECT $",
           "SELECT \\x",                        // a backslash outside a string
           "SELECT {1}",
           "SELECT 1::float(10)",               // float4 or float8 by the value
           "SELECT CAST(1 AS FLOAT (30))",
           "SELECT 1\x01",                      // control characters
           std::string("SELECT '\0'", 10),
           "SELECT 'a\x02'",
           "SELECT '\xff'",                    // not UTF-8
           "SELECT '\xc3'",
           "SELECT '\xed\xa0\x80'",            // a surrogate
       }) {
    EXPECT_TRUE(refused(sql)) << sql;
  }
}

TEST(ShapeLexer, KeyHasNoLiteralText) {
  const analysis::Shape s =
      lexOk("UPDATE pgbench_accounts SET abalance = abalance + -4242 WHERE aid = 31337;");
  ASSERT_EQ(s.literals.size(), 2u);
  EXPECT_EQ(s.key.find("4242"), std::string::npos);
  EXPECT_EQ(s.key.find("31337"), std::string::npos);
  EXPECT_NE(s.key.find("UPDATE pgbench_accounts SET abalance = abalance + -"), std::string::npos);
}

}  // namespace
}  // namespace pgwarden::guards
