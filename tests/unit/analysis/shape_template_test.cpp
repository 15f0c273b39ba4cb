// analysis: shape templates (shape_template.cpp, built from one analysis and applied by the
// Analyzer's shape cache to texts of the same shape) must never change an analysis. Every
// statement of the security corpora, pgbench's and some agent-like ones, each with
// literal-substituted variants (other integers small and huge, negative ones, floats, strings with
// quotes and non-ASCII text, empty strings, wildcards, equal constants, a predicate turned
// trivial), goes through an Analyzer warmed so that the shape cache serves what it can; each
// result must equal analyzeUncached field for field. The pgbench statements must actually be
// served from the cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/shape.h"
#include "analysis/shape_template.h"
#include "common/ascii.h"
#include "guards/guard_test_util.h"

namespace pgwarden::guards {
namespace {

const std::vector<std::string>& pgbenchStatements() {
  static const std::vector<std::string> list = {
      "SELECT abalance FROM pgbench_accounts WHERE aid = 48213;",
      "UPDATE pgbench_accounts SET abalance = abalance + -4242 WHERE aid = 31337;",
      "UPDATE pgbench_tellers SET tbalance = tbalance + 1234 WHERE tid = 55;",
      "UPDATE pgbench_branches SET bbalance = bbalance + 1234 WHERE bid = 7;",
      "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (55, 7, 31337, 1234, "
      "CURRENT_TIMESTAMP);",
  };
  return list;
}

const std::vector<std::string>& agentStatements() {
  static const std::vector<std::string> list = {
      "SELECT id, carrier FROM fct_shipments WHERE id = 1234",
      "SELECT * FROM fct_shipments WHERE carrier = 'UPS' AND ship_date >= '2024-01-01' LIMIT 100",
      "SELECT count(*) FROM fct_shipments WHERE region = 'EU' AND weight > 12.5",
      "SELECT * FROM fct_shipments WHERE status LIKE 'DEL%' LIMIT 10",
      "SELECT * FROM fct_shipments WHERE status LIKE 'DELIVERED' LIMIT 10",
      "SELECT * FROM fct_shipments WHERE carrier ~ 'U.S' LIMIT 10",
      "SELECT * FROM fct_shipments WHERE id IN (1, 2, 3, 1000)",
      "SELECT * FROM fct_shipments WHERE id BETWEEN 100 AND 200 ORDER BY id LIMIT 5 OFFSET 10",
      "SELECT * FROM fct_shipments WHERE 1 = 1 LIMIT 1000",
      "SELECT * FROM fct_shipments WHERE id = 5 OR 1 = 1",
      "SELECT * FROM fct_shipments WHERE 'a' = 'a'",
      "SELECT * FROM fct_shipments WHERE id = 5 OR 'x' = 'y'",
      "SELECT * FROM fct_shipments WHERE carrier ILIKE 'a%' OR carrier ILIKE 'b' LIMIT 9",
      "SELECT * FROM fct_shipments WHERE carrier NOT LIKE 'x' AND status ~* 'y' LIMIT 9",
      "SELECT * FROM fct_shipments WHERE 'a' = E'a'",
      "SELECT * FROM fct_shipments WHERE 1000 = 1000.0",
      "SELECT * FROM fct_shipments WHERE id + 1000 = id + 2000",
      "SELECT * FROM fct_shipments WHERE id + 1000 = id + 1000",
      "SELECT * FROM fct_shipments WHERE carrier || 'x' = carrier || 'y' LIMIT 5",
      "SELECT * FROM fct_shipments WHERE (id + 5) IS NULL OR (id + 6) IS NOT NULL",
      "SELECT * FROM fct_shipments WHERE id = 5 OR (id * 7) IS NULL OR (id * 7) IS NOT NULL",
      "SELECT * FROM fct_shipments TABLESAMPLE SYSTEM (5) WHERE carrier = 'UPS'",
      "SELECT * FROM fct_shipments TABLESAMPLE BERNOULLI (150.5)",
      "SELECT pg_sleep(1000)",
      "SELECT pg_sleep(0.5), pg_sleep(-1)",
      "SELECT * FROM generate_series(1, 100000000) g",
      "SELECT set_config('work_mem', '1GB', false)",
      "SELECT set_config('WORK_MEM', '64kB', true)",
      "SELECT current_setting('search_path')",
      "SELECT pg_read_file('/etc/passwd', 0, 100)",
      "SELECT * FROM fct_shipments WHERE carrier = $1 AND id > 500 LIMIT 20",
      "SELECT * FROM fct_shipments WHERE carrier = U&'UPS' AND status = $$DELIVERED$$",
      "SELECT * FROM fct_shipments WHERE note = E'it\\'s' LIMIT 3",
      "SELECT B'0101', X'1F', 2147483648, 1e10, .5",
      "SELECT * FROM fct_shipments WHERE id = -5 AND weight > -2.5",
      "SELECT * FROM fct_shipments LIMIT 0",
      "SELECT * FROM fct_shipments LIMIT 2147483648",
      "SELECT * FROM fct_shipments LIMIT 1.5",
      "SELECT * FROM fct_shipments LIMIT -1",
      "SELECT * FROM fct_shipments WHERE carrier ILIKE '%' LIMIT 5",
      "SELECT * FROM fct_shipments WHERE carrier ~ '' LIMIT 5",
      "SELECT * FROM fct_shipments WHERE carrier ~ '.*' LIMIT 5",
      "SELECT * FROM fct_shipments /* 42 */ WHERE id = 42 -- 'x'\n LIMIT 7",
      "SELECT 1; SELECT 2",
      "SELECT 1 FROM fct_shipments WHERE id = 10; DELETE FROM fct_shipments WHERE id = 10",
      "DELETE FROM w_items WHERE id = 12",
      "UPDATE w_items SET qty = qty - 3 WHERE id = 4 AND grp = 'a'",
      "INSERT INTO w_items (id, grp, qty) VALUES (1, 'a', 10), (2, 'b', 20)",
      "WITH x AS (SELECT id FROM fct_shipments WHERE id < 1000) SELECT count(*) FROM x",
      "SELECT carrier, sum(weight) FROM fct_shipments s JOIN dim_region r ON r.region = s.region "
      "WHERE s.id > 100 GROUP BY 1 LIMIT 50",
      "SELECT id::text || 'x', '2024-01-01'::date + 3 FROM fct_shipments WHERE id = 3",
      "SET statement_timeout = 1000",
      "SET search_path = 'public', 'x'",
      "SAVEPOINT s1",
      "EXPLAIN SELECT * FROM fct_shipments WHERE id = 3",
      "COPY (SELECT 1) TO '/tmp/x'",
  };
  return list;
}

// Replacement texts per literal class; variant k writes entry (k + i) of its class's list into
// literal i, and one more variant writes the same entry into every literal (equal constants).
const std::vector<std::string>& replacements(analysis::LiteralClass cls) {
  static const std::vector<std::string> ints = {
      "1", "0", "7", "99", "100", "48213", "2147483647", "2147483648", "99999999999999999999",
      "-5", "-2147483648"};
  static const std::vector<std::string> floats = {"0.5", "1e10", "3.14159", "0.0", "1.5E-3",
                                                  "123456.789", "-2.5", "100.0"};
  static const std::vector<std::string> strings = {
      "'x'", "'it''s'", "'ünïcødé ✓'", "''", "'%'", "'a%'",
      "'.*'", "'O''Brien; DROP TABLE x'", "'DELIVERED'", "'%%'", "'_'", "'WORK_MEM'", "'1'"};
  static const std::vector<std::string> estrings = {"E'a\\\\b'", "E'q\\'s'", "E''", "E'%'", "E'x'"};
  static const std::vector<std::string> dollars = {"$$x$$", "$$%$$", "$$$$", "$t$it's$t$", "$$.*$$"};
  static const std::vector<std::string> bits = {"B'1'", "B''", "B'0101'", "X'ff'", "X'00'"};
  switch (cls) {
    case analysis::LiteralClass::kInteger:
    case analysis::LiteralClass::kBigInteger:
      return ints;
    case analysis::LiteralClass::kFloat:
      return floats;
    case analysis::LiteralClass::kString:
    case analysis::LiteralClass::kUString:
      return strings;
    case analysis::LiteralClass::kEString:
      return estrings;
    case analysis::LiteralClass::kDollar:
      return dollars;
    case analysis::LiteralClass::kBitB:
    case analysis::LiteralClass::kBitX:
      return bits;
  }
  return ints;
}

std::string substitute(const std::string& sql, const analysis::Shape& shape, size_t variant,
                       bool same) {
  std::string out;
  size_t at = 0;
  for (size_t i = 0; i < shape.literals.size(); ++i) {
    const analysis::ShapeLiteral& lit = shape.literals[i];
    const auto& list = replacements(lit.cls);
    out += sql.substr(at, lit.offset - at);
    out += list[(variant + (same ? 0 : i)) % list.size()];
    at = lit.offset + lit.length;
  }
  return out + sql.substr(at);
}

// Random picks from the same lists, a third of them repeating an earlier pick of the text (equal
// constants in new places). Seeded: the same texts every run.
std::string randomVariant(const std::string& sql, const analysis::Shape& shape, std::mt19937& rng) {
  std::string out;
  std::vector<std::string> picked;
  size_t at = 0;
  for (const analysis::ShapeLiteral& lit : shape.literals) {
    const auto& list = replacements(lit.cls);
    std::string value = list[rng() % list.size()];
    if (!picked.empty() && rng() % 3 == 0) {
      const std::string& earlier = picked[rng() % picked.size()];
      // Only where it is of the same syntax family (a number for a number, a quote for a quote).
      if (std::find(list.begin(), list.end(), earlier) != list.end()) value = earlier;
    }
    picked.push_back(value);
    out += sql.substr(at, lit.offset - at) + value;
    at = lit.offset + lit.length;
  }
  return out + sql.substr(at);
}

// The first `WHERE col = lit` (lit a quoted string or digits) of `sql` made `WHERE lit = lit`,
// if it has one. Scanned by hand: GCC 12's <regex> does not build warning-free under -O2.
std::optional<std::string> trivialPredicate(const std::string& sql) {
  const auto isWord = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = 0; at + 6 <= sql.size(); ++at) {
    if (!iequals(std::string_view(sql).substr(at, 6), "WHERE ")) continue;
    size_t p = at + 6;
    const size_t col = p;
    while (p < sql.size() && isWord(sql[p])) ++p;
    if (p == col || sql.compare(p, 3, " = ") != 0) continue;
    p += 3;
    const size_t lit = p;
    if (p < sql.size() && sql[p] == '\'') {
      const size_t close = sql.find('\'', p + 1);
      if (close == std::string::npos) continue;
      p = close + 1;
    } else {
      while (p < sql.size() && std::isdigit(static_cast<unsigned char>(sql[p]))) ++p;
      if (p == lit) continue;
    }
    const std::string value = sql.substr(lit, p - lit);
    return sql.substr(0, at) + "WHERE " + value + " = " + value + sql.substr(p);
  }
  return std::nullopt;
}

// The statement, its variants, and the variants of the statement with `WHERE col = lit` made
// `WHERE lit = lit` (a predicate turned trivial).
std::vector<std::string> variantsOf(const std::string& sql) {
  std::vector<std::string> bases{sql};
  if (const auto trivial = trivialPredicate(sql)) bases.push_back(*trivial);
  std::vector<std::string> out;
  for (const std::string& base : bases) {
    out.push_back(base);
    analysis::Shape shape;
    if (!analysis::lexShape(base, shape) || shape.literals.empty()) continue;
    for (size_t v = 0; v < 14; ++v) out.push_back(substitute(base, shape, v, false));
    for (size_t v = 0; v < 6; ++v) out.push_back(substitute(base, shape, v, true));
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(base)));
    for (int v = 0; v < 12; ++v) out.push_back(randomVariant(base, shape, rng));
    // Each variant once more, so every shape is seen after its template could be built.
    for (size_t v = 0; v < 4; ++v) out.push_back(substitute(base, shape, v + 3, false));
  }
  return out;
}

std::vector<std::string> corpusStatements() {
  std::vector<std::string> out = test::allCorpusStatements();
  EXPECT_GT(out.size(), 300u);
  return out;
}

// Runs every text through `analyzer` and compares with the full analysis.
void expectSameAsUncached(analysis::Analyzer& analyzer, const std::vector<std::string>& texts) {
  for (const std::string& text : texts) {
    const auto got = analyzer.analyze(text);
    const auto want = analysis::analyzeUncached(text);
    ASSERT_TRUE(got && want);
    EXPECT_TRUE(*got == *want) << "shape cache changed the analysis of: " << text;
  }
}

TEST(ShapeCache, CorpusAndVariantsEqualTheFullAnalysis) {
  std::vector<std::string> statements = corpusStatements();
  statements.insert(statements.end(), pgbenchStatements().begin(), pgbenchStatements().end());
  statements.insert(statements.end(), agentStatements().begin(), agentStatements().end());
  std::vector<std::string> texts;
  for (const std::string& s : statements) {
    for (std::string& v : variantsOf(s)) texts.push_back(std::move(v));
  }
  analysis::Analyzer forward;
  expectSameAsUncached(forward, texts);
  // The other order: variants warm the cache for the originals.
  analysis::Analyzer backward;
  expectSameAsUncached(backward, std::vector<std::string>(texts.rbegin(), texts.rend()));
  EXPECT_GT(forward.shapeHits(), 400u);
  std::cout << "texts " << texts.size() << ", shape hits " << forward.shapeHits() << ", shape misses "
            << forward.shapeMisses() << "\n";
}

TEST(ShapeCache, PgbenchStatementsAreServedFromTheShapeCache) {
  for (const std::string& sql : pgbenchStatements()) {
    SCOPED_TRACE(sql);
    analysis::Analyzer analyzer;
    analysis::Shape shape;
    ASSERT_TRUE(analysis::lexShape(sql, shape));
    std::vector<std::string> texts;
    for (int i = 0; i < 50; ++i) {
      std::string text;
      size_t at = 0;
      for (size_t k = 0; k < shape.literals.size(); ++k) {
        const analysis::ShapeLiteral& lit = shape.literals[k];
        text += sql.substr(at, lit.offset - at);
        // Same category as the original (a number of the same size class).
        const double base = lit.number >= 100 ? 100 + 997 * i + 13 * static_cast<double>(k) : 1 + (i + k) % 98;
        text += std::to_string(static_cast<int64_t>(base));
        at = lit.offset + lit.length;
      }
      texts.push_back(text + sql.substr(at));
    }
    expectSameAsUncached(analyzer, texts);
    // The first two texts are analysed in full (the second one builds the template).
    EXPECT_EQ(analyzer.shapeHits(), 48u);
    EXPECT_EQ(analyzer.shapeMisses(), 2u);
  }
}

// A rebuilt analysis's storage is refilled for a later text only once no one holds it: analyses
// still held keep their own values, whether the next texts come while they are held or after.
TEST(ShapeCache, AHeldAnalysisIsNeverRefilled) {
  analysis::Analyzer analyzer;
  const auto text = [](int aid) { return "SELECT abalance FROM pgbench_accounts WHERE aid = " + std::to_string(aid); };
  for (int i = 1; i <= 2; ++i) analyzer.analyze(text(100 + i));  // the second builds the template
  std::vector<std::pair<std::string, std::shared_ptr<const analysis::Analysis>>> held;
  for (int i = 3; i < 40; ++i) {
    held.emplace_back(text(1000 + i), analyzer.analyze(text(1000 + i)));
    if (i % 3 == 0) held.erase(held.begin());  // some let go, so their storage is refilled
    for (const auto& [sql, a] : held) {
      SCOPED_TRACE(sql);
      ASSERT_TRUE(a);
      EXPECT_EQ(*a, *analysis::analyzeUncached(sql));
    }
  }
  EXPECT_EQ(analyzer.shapeHits(), 37u);
}

TEST(ShapeCache, ValueDependentPredicatesAreNotReused) {
  analysis::Analyzer analyzer;
  analyzer.analyze("SELECT * FROM fct_shipments WHERE carrier LIKE 'a%' LIMIT 10");
  analyzer.analyze("SELECT * FROM fct_shipments WHERE carrier LIKE 'b%' LIMIT 10");
  const auto trivial = analyzer.analyze("SELECT * FROM fct_shipments WHERE carrier LIKE '%' LIMIT 10");
  ASSERT_EQ(trivial->statements.size(), 1u);
  ASSERT_EQ(trivial->statements[0].relations.size(), 1u);
  EXPECT_TRUE(trivial->statements[0].relations[0].trivial_predicate);
  const auto eq = analyzer.analyze("SELECT * FROM fct_shipments WHERE 1000 = 1000");
  EXPECT_TRUE(eq->statements[0].relations[0].trivial_predicate);
  analyzer.analyze("SELECT * FROM fct_shipments WHERE 1000 = 2000");
  analyzer.analyze("SELECT * FROM fct_shipments WHERE 3000 = 4000");
  const auto eq2 = analyzer.analyze("SELECT * FROM fct_shipments WHERE 5000 = 5000");
  EXPECT_TRUE(*eq2 == *analysis::analyzeUncached("SELECT * FROM fct_shipments WHERE 5000 = 5000"));
}

TEST(ShapeCache, SettingsAndFunctionArgumentsAreExact) {
  analysis::Analyzer analyzer;
  for (const char* sql : {"SELECT set_config('work_mem', '1GB', false)",
                          "SELECT set_config('search_path', 'x', false)",
                          "SELECT set_config('WORK_MEM', '1GB', false)", "SELECT pg_sleep(1)",
                          "SELECT pg_sleep(2)", "SELECT pg_sleep(100000)", "SET work_mem = '1GB'",
                          "SET work_mem = '64kB'", "SET statement_timeout = 0"}) {
    const auto got = analyzer.analyze(sql);
    EXPECT_TRUE(*got == *analysis::analyzeUncached(sql)) << sql;
  }
  EXPECT_EQ(analyzer.analyze("SELECT pg_sleep(100000)")->statements[0].calls[0].args[0].text, "100000");
}

TEST(ShapeCache, AShapeSeenOnceTakesNoEntry) {
  analysis::Analyzer analyzer;
  analyzer.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = 1000");
  EXPECT_EQ(analyzer.shapeCacheSize(), 0u);
  analyzer.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = 2000");
  EXPECT_EQ(analyzer.shapeCacheSize(), 1u);
  EXPECT_EQ(analyzer.shapeHits(), 0u);
  analyzer.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = 3000");
  EXPECT_EQ(analyzer.shapeHits(), 1u);
  // A refused shape keeps its entry, so it is not probed again.
  analyzer.analyze("SET work_mem = '1GB'");
  analyzer.analyze("SET work_mem = '2GB'");
  EXPECT_EQ(analyzer.shapeCacheSize(), 2u);
  EXPECT_TRUE(*analyzer.analyze("SET work_mem = '3GB'") ==
              *analysis::analyzeUncached("SET work_mem = '3GB'"));
  EXPECT_EQ(analyzer.shapeHits(), 1u);
}

TEST(ShapeCache, StaysBounded) {
  analysis::Analyzer analyzer(8, 256);
  for (int i = 0; i < 200; ++i) {
    const std::string col = "c" + std::to_string(i);
    analyzer.analyze("SELECT " + col + " FROM t WHERE id = 1000");
    analyzer.analyze("SELECT " + col + " FROM t WHERE id = 2000");
    analyzer.analyze("SELECT " + col + " FROM t WHERE id = 3000");
    EXPECT_LE(analyzer.shapeCacheSize(), 8u);
    EXPECT_LE(analyzer.cacheSize(), 8u);
  }
  EXPECT_GT(analyzer.shapeHits(), 150u);
  // Texts over max_cached_bytes stay out of both caches.
  const size_t before = analyzer.shapeMisses();
  const std::string pad(300, ' ');
  for (int i = 0; i < 5; ++i) {
    const std::string sql = "SELECT x FROM t WHERE id = " + std::to_string(1000 + i) + pad;
    EXPECT_TRUE(*analyzer.analyze(sql) == *analysis::analyzeUncached(sql));
  }
  EXPECT_EQ(analyzer.shapeMisses(), before);
  analysis::Analyzer none(0);
  none.analyze("SELECT x FROM t WHERE id = 1000");
  none.analyze("SELECT x FROM t WHERE id = 2000");
  none.analyze("SELECT x FROM t WHERE id = 3000");
  EXPECT_EQ(none.shapeCacheSize(), 0u);
  EXPECT_EQ(none.shapeHits(), 0u);
}

// Most corpus statements with literals get a template; set_config (its setting name is folded to
// lower case) and a LIMIT that is not an int32 integer deliberately do not.
TEST(ShapeCache, WhichStatementsGetATemplate) {
  std::vector<std::string> statements = corpusStatements();
  statements.insert(statements.end(), agentStatements().begin(), agentStatements().end());
  int with_literals = 0, built = 0;
  for (const std::string& sql : statements) {
    analysis::Shape shape;
    if (!analysis::lexShape(sql, shape) || shape.literals.empty()) continue;
    ++with_literals;
    if (analysis::buildShapeTemplate(sql, shape, *analysis::analyzeUncached(sql),
                                     analysis::analyzeUncached))
      ++built;
  }
  EXPECT_GT(built, with_literals / 2);
  for (const char* sql : {"SELECT set_config('work_mem', '1GB', false)",
                          "SELECT * FROM fct_shipments LIMIT 1.5",
                          "SELECT * FROM fct_shipments LIMIT 2147483648", "SET work_mem = '1GB'",
                          "EXPLAIN SELECT * FROM fct_shipments WHERE id = 3", "SAVEPOINT s1",
                          "SELECT 1/0 FROM"}) {
    analysis::Shape shape;
    ASSERT_TRUE(analysis::lexShape(sql, shape)) << sql;
    EXPECT_EQ(analysis::buildShapeTemplate(sql, shape, *analysis::analyzeUncached(sql),
                                           analysis::analyzeUncached),
              nullptr)
        << sql;
  }
  for (const std::string& sql : pgbenchStatements()) {
    analysis::Shape shape;
    ASSERT_TRUE(analysis::lexShape(sql, shape));
    EXPECT_NE(analysis::buildShapeTemplate(sql, shape, *analysis::analyzeUncached(sql),
                                           analysis::analyzeUncached),
              nullptr)
        << sql;
  }
  // Long IN lists: proving a template would take too long on the loop.
  for (int n : {200, 300}) {
    std::string sql = "SELECT * FROM fct_shipments WHERE id IN (1000";
    for (int i = 1; i < n; ++i) sql += ", " + std::to_string(1000 + i);
    sql += ")";
    analysis::Shape shape;
    ASSERT_TRUE(analysis::lexShape(sql, shape));
    const auto tmpl = analysis::buildShapeTemplate(sql, shape, *analysis::analyzeUncached(sql),
                                                   analysis::analyzeUncached);
    EXPECT_EQ(tmpl != nullptr, n <= 256) << n;
  }
}

// A spare analysis that still holds another text of the same template is refilled with only
// the fields the rules set: for every corpus statement's template, each of its variants in turn
// written over the previous one (whose literals, and so offsets and lengths, differ) must equal
// that variant written into a fresh analysis (the other tests hold that one to the full
// analysis).
TEST(ShapeCache, ARefillOverAnotherTextOfTheTemplateEqualsTheFullAnalysis) {
  std::vector<std::string> statements = corpusStatements();
  statements.insert(statements.end(), pgbenchStatements().begin(), pgbenchStatements().end());
  statements.insert(statements.end(), agentStatements().begin(), agentStatements().end());
  int over_another = 0;
  for (const std::string& sql : statements) {
    analysis::Shape shape;
    if (!analysis::lexShape(sql, shape) || shape.literals.empty()) continue;
    const auto tmpl = analysis::buildShapeTemplate(sql, shape, *analysis::analyzeUncached(sql),
                                                   analysis::analyzeUncached);
    if (!tmpl) continue;
    analysis::Analysis spare;
    bool holds = false;
    std::vector<std::string> texts = variantsOf(sql);
    texts.push_back(sql);
    for (const std::string& text : texts) {
      SCOPED_TRACE(sql + "  ->  " + text);
      analysis::Shape s;
      if (!analysis::lexShape(text, s) || s.key != shape.key) continue;
      const bool was_holding = holds;
      holds = analysis::refillFromShapeTemplate(*tmpl, s, holds, spare);
      analysis::Analysis fresh;
      const bool fresh_ok = analysis::refillFromShapeTemplate(*tmpl, s, false, fresh);
      ASSERT_EQ(holds, fresh_ok);
      if (!holds) continue;
      EXPECT_EQ(spare, fresh);
      if (was_holding) ++over_another;
    }
  }
  EXPECT_GT(over_another, 100);
}

TEST(ShapeCache, ProbeTextsKeepTheShape) {
  for (const char* sql : {"SELECT * FROM t WHERE a = 1000 AND b = 'x' AND c = 1000 AND d = 'x'",
                          "SELECT E'a\\\\b', $q$z$q$, B'01', X'af', U&'u', 1.5, 0, ''"}) {
    analysis::Shape shape;
    ASSERT_TRUE(analysis::lexShape(sql, shape));
    for (int round = 0; round < 2; ++round) {
      std::string probe;
      ASSERT_TRUE(analysis::shapeProbeText(sql, shape, round, probe));
      analysis::Shape ps;
      ASSERT_TRUE(analysis::lexShape(probe, ps)) << probe;
      EXPECT_EQ(ps.key, shape.key) << probe;
      EXPECT_NE(probe, sql);
    }
  }
}

}  // namespace
}  // namespace pgwarden::guards

namespace pgwarden::guards {
namespace {

// The statement-only screens' facts hold spans into the text: a template must move them with the
// literals before them, or not be kept.
TEST(ShapeCache, ScreenIssueSpansFollowTheLiterals) {
  const std::vector<std::string> bases = {
      "SELECT count(*) FROM t WHERE region = 'north' AND status = NULL",
      "SELECT count(*) FROM t WHERE status NOT IN ('a', NULL, 'bbbb') AND id > 5",
      "SELECT count(*) FILTER (WHERE status = 'PAID') / count(*) FROM t WHERE id > 10",
      "SELECT sum(DISTINCT amount) FROM t WHERE region = 'x'",
      "SELECT count(*) FROM t WHERE created_at BETWEEN '2024-01-01' AND '2024-01-31' AND id = 7",
      "SELECT c.id, count(*) FROM c LEFT JOIN o ON o.cid = c.id WHERE c.region = 'eu' GROUP BY c.id",
  };
  std::vector<std::string> texts;
  for (const std::string& b : bases) {
    for (std::string& v : variantsOf(b)) texts.push_back(std::move(v));
  }
  analysis::Analyzer analyzer;
  expectSameAsUncached(analyzer, texts);
  const auto a =
      analysis::analyzeUncached("SELECT count(*) FROM t WHERE region = 'north' AND status = NULL");
  ASSERT_EQ(a->statements.at(0).screen.issues.size(), 1u);
  const analysis::ScreenIssue& issue = a->statements[0].screen.issues[0];
  EXPECT_EQ(issue.kind, analysis::ScreenIssue::Kind::kNullComparison);
  EXPECT_EQ(issue.subject, "status");
  EXPECT_EQ(issue.replacement, "IS NULL");
}

}  // namespace
}  // namespace pgwarden::guards
