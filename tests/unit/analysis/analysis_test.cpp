// analysis.cpp: statements PostgreSQL runs with its default max_stack_depth are analysed, however
// deep (nested scalar subqueries, long UNION ALL chains, long operator chains, nested calls), and a
// statement deeper than the server accepts is refused with an honest message, never a crash; the
// bounded cache; the fingerprint, equal to libpg_query's. What the walker reads from each statement
// kind is in statement_walker_test.cpp.
#include <gtest/gtest.h>
#include <pg_query.h>
#include <pthread.h>

#include <fstream>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/pg_json.h"

namespace pgwarden::guards {
namespace {

std::string nestedSubqueries(int n) {
  std::string sql = "SELECT ";
  for (int i = 0; i < n; ++i) sql += "(SELECT ";
  sql += "1";
  for (int i = 0; i < n; ++i) sql += ")";
  return sql;
}

std::string unionArms(int n) {
  std::string sql = "SELECT 1";
  for (int i = 1; i < n; ++i) sql += " UNION ALL SELECT " + std::to_string(i + 1);
  return sql;
}

std::string plusChain(int n) {
  std::string sql = "SELECT 1";
  for (int i = 1; i < n; ++i) sql += "+1";
  return sql;
}

std::string nestedCoalesce(int n) {
  std::string sql = "SELECT ";
  for (int i = 0; i < n; ++i) sql += "coalesce(";
  sql += "1";
  for (int i = 0; i < n; ++i) sql += ", 2)";
  return sql;
}

void expectAnalysed(const std::string& sql) {
  const auto a = analysis::analyzeUncached(sql);
  ASSERT_TRUE(a->ok) << a->error << " (" << sql.substr(0, 60) << "...)";
  ASSERT_EQ(a->statements.size(), 1u);
  EXPECT_EQ(a->statements[0].kind, analysis::StatementKind::kSelect);
}

// The figures of statements PostgreSQL 15 runs with max_stack_depth = 2MB.
TEST(DeepStatements, NestedScalarSubqueries) { expectAnalysed(nestedSubqueries(145)); }
TEST(DeepStatements, UnionAllArms) { expectAnalysed(unionArms(1009)); }
TEST(DeepStatements, PlusChain) { expectAnalysed(plusChain(508)); }
TEST(DeepStatements, NestedCoalesce) { expectAnalysed(nestedCoalesce(338)); }

// Analyses `sql` on a thread with a stack of `stack_mib` MiB.
void analyseOnStack(size_t stack_mib, const std::string& sql, bool expect_ok) {
  struct Job {
    const std::string* sql;
    bool ok;
    std::string error;
  } job{&sql, false, {}};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack_mib << 20), 0);
  pthread_t t;
  ASSERT_EQ(pthread_create(
                &t, &attr,
                [](void* p) -> void* {
                  auto* j = static_cast<Job*>(p);
                  const auto a = analysis::analyzeUncached(*j->sql);
                  j->ok = a->ok;
                  j->error = a->error;
                  return nullptr;
                },
                &job),
            0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's frames are several times larger: the depth the stack allows is lower, so
  // a deep statement may be refused here, never analysed past the stack.
  if (!job.ok) expect_ok = false;
#endif
  EXPECT_EQ(job.ok, expect_ok) << job.error << " (" << sql.substr(0, 60) << "...)";
  if (!expect_ok) {
    EXPECT_NE(job.error.find("nested deeper than pgwarden analyses"), std::string::npos)
        << job.error;
  }
}

// The most PostgreSQL 15 runs with max_stack_depth = 2MB, on a loop thread's 8 MiB stack.
TEST(DeepStatements, ServerMaximaOnALoopThread) {
  analyseOnStack(8, nestedSubqueries(2111), true);
  analyseOnStack(8, unionArms(12000), true);
  analyseOnStack(8, plusChain(4092), true);
  analyseOnStack(8, nestedCoalesce(4515), true);
}

// Beyond the bound, or beyond what a small stack can walk: an honest refusal, never a crash.
TEST(DeepStatements, DeeperThanTheStackHoldsRefused) {
  analyseOnStack(8, nestedSubqueries(2400), false);
  analyseOnStack(8, plusChain(9000), false);
  analyseOnStack(1, nestedSubqueries(2111), false);
  analyseOnStack(1, nestedCoalesce(4515), false);
  analyseOnStack(1, nestedSubqueries(100), true);
}

// ---- cache and fingerprint ----

TEST(Analyzer, CacheHitReturnsTheSameAnalysis) {
  analysis::Analyzer a(8);
  auto first = a.analyze("SELECT 1");
  auto second = a.analyze("SELECT 1");
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(a.cacheHits(), 1u);
  EXPECT_EQ(a.cacheMisses(), 1u);
  EXPECT_EQ(a.cacheSize(), 1u);
  auto other = a.analyze("SELECT  1");  // exact text is the key
  EXPECT_NE(first.get(), other.get());
  EXPECT_EQ(a.cacheMisses(), 2u);
}

// Texts of distinct shapes (a new alias each), so the exact cache is what answers them.
TEST(Analyzer, EvictsLeastRecentlyUsed) {
  analysis::Analyzer a(3);
  auto t1 = a.analyze("SELECT 1 AS a");
  a.analyze("SELECT 1 AS b");
  a.analyze("SELECT 1 AS c");
  a.analyze("SELECT 1 AS a");  // now most recent; "b" is the oldest
  a.analyze("SELECT 1 AS d");  // evicts "b"
  EXPECT_EQ(a.cacheSize(), 3u);
  const uint64_t misses = a.cacheMisses();
  EXPECT_EQ(a.analyze("SELECT 1 AS a").get(), t1.get());
  a.analyze("SELECT 1 AS b");
  EXPECT_EQ(a.cacheMisses(), misses + 1);
  EXPECT_EQ(a.cacheSize(), 3u);
}

TEST(Analyzer, StaysBoundedUnderManyTexts) {
  analysis::Analyzer a(16);
  for (int i = 0; i < 1000; ++i) a.analyze("SELECT 1 AS c" + std::to_string(i));
  EXPECT_EQ(a.cacheSize(), 16u);
}

// A text its shape's template answers takes no exact entry: pgbench-style texts never repeat, so
// they would only push out texts that do.
TEST(Analyzer, TextsAnsweredByTheirShapeTakeNoExactEntry) {
  analysis::Analyzer a(16);
  for (int i = 0; i < 1000; ++i) {
    a.analyze("SELECT abalance FROM pgbench_accounts WHERE aid = " + std::to_string(1000 + i) + ";");
  }
  EXPECT_GE(a.shapeHits(), 990u);
  EXPECT_LE(a.cacheSize(), 2u);
}

TEST(Analyzer, LongTextsAreNotCached) {
  analysis::Analyzer a(16, 64);
  const std::string big = "SELECT '" + std::string(100, 'x') + "'";
  auto x = a.analyze(big);
  auto y = a.analyze(big);
  EXPECT_TRUE(x->ok);
  EXPECT_NE(x.get(), y.get());
  EXPECT_EQ(a.cacheSize(), 0u);
}

TEST(Analyzer, ParseErrorsAreCachedToo) {
  analysis::Analyzer a(4);
  auto x = a.analyze("SELEC 1");
  EXPECT_FALSE(x->ok);
  EXPECT_EQ(a.analyze("SELEC 1").get(), x.get());
}

TEST(Analyzer, ZeroByteIsAnError) {
  const auto a = analysis::analyzeUncached(std::string_view("SELECT 1\0; DELETE FROM t", 24));
  EXPECT_FALSE(a->ok);
}

TEST(Analyzer, DeepNestingDoesNotCrash) {
  // PostgreSQL runs 3,000 (its answer: 3001): analysed. Ten times that is refused with a message
  // (the DeepStatements tests above have the bounds).
  for (const int n : {3000, 30000}) {
    std::string sql = "SELECT ";
    for (int i = 0; i < n; ++i) sql += "1+(";
    sql += "1";
    for (int i = 0; i < n; ++i) sql += ")";
    const auto a = analysis::analyzeUncached(sql);
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer's larger frames lower the depth the stack allows: refused, not crashed.
    if (!a->ok) {
      EXPECT_FALSE(a->error.empty());
      continue;
    }
#endif
    EXPECT_EQ(a->ok, n == 3000) << a->error;
    EXPECT_EQ(a->error.empty(), n == 3000);
  }
}

TEST(Fingerprint, SameShapeWhateverTheLiterals) {
  const auto a = analysis::analyzeUncached("SELECT * FROM orders WHERE status = 'late'");
  const auto b = analysis::analyzeUncached("select *  from orders where status='DELAYED'");
  const auto c = analysis::analyzeUncached("SELECT * FROM users WHERE status = 'late'");
  ASSERT_TRUE(a->ok && b->ok && c->ok);
  EXPECT_NE(a->fingerprint, 0u);
  EXPECT_EQ(a->fingerprint, b->fingerprint);
  EXPECT_EQ(a->fingerprint_hex, b->fingerprint_hex);
  EXPECT_NE(a->fingerprint, c->fingerprint);
  EXPECT_EQ(a->fingerprint_hex.size(), 16u);
}

// Reads are fingerprinted from the tree the analysis already holds: the value must be exactly
// libpg_query's, over the security corpora and statements that reach each of its special rules.
TEST(Fingerprint, EqualsLibpgQueryFingerprint) {
  std::vector<std::string> texts = {
      "SELECT * FROM t WHERE id IN (3, 1, 2, 1)",
      "SELECT * FROM t WHERE a = ANY(ARRAY[1, 2]) AND b = ALL(c) AND d NOT IN (e, f)",
      "SELECT DISTINCT status FROM big",
      "SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b DESC NULLS LAST",
      "SELECT * FROM t WHERE $1::bool AND x = $2 AND y = 'a'::text AND z = x::int",
      "SELECT * FROM orders_2024_01 o JOIN s12.t1 USING (id) LEFT JOIN a1b22c333 ON true",
      "SELECT a AS x, count(*) FILTER (WHERE b > 1.5) AS n FROM t GROUP BY 1 HAVING count(*) > 0",
      "SELECT sum(w) OVER (PARTITION BY r ORDER BY d ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) FROM t",
      "SELECT 1 UNION ALL SELECT 2 UNION SELECT 3 EXCEPT SELECT 4",
      "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 9) SELECT * FROM r",
      "SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (1, 'a')) v(x, y)",
      "SELECT CASE WHEN a IS NULL THEN 0 WHEN b IS TRUE THEN 1 ELSE coalesce(c, 2) END FROM t",
      "SELECT greatest(a, b), (x).y, arr[1], ROW(1, a), current_date, true, false, NULL, B'101' FROM t",
      "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id) AND a IN (SELECT b FROM v)",
      "SELECT 1; SELECT 2",
      "SELECT 1; DELETE FROM t",
      "INSERT INTO t VALUES (1)",
      "SELECT * FROM t FOR UPDATE",
      "SELECT * INTO x FROM t",
      "SELECT -1, +2, 0, 100000000000, a.b.c, \"Quoted\".\"Name\" FROM U&\"\\0070g_authid\"",
  };
  // A token stream longer than 240 bytes takes XXH3's long path.
  std::string wide = "SELECT ";
  for (int i = 0; i < 120; ++i) wide += (i ? ", col_" : "col_") + std::string(1, static_cast<char>('a' + i % 26)) + "x";
  texts.push_back(wide + " FROM some_rather_long_table_name");
  // Past libpg_query's own depth cut-off (100 levels), whichever path takes them.
  std::string unions = "SELECT a FROM t0";
  for (int i = 1; i < 120; ++i) unions += " UNION SELECT a FROM t" + std::to_string(i);
  texts.push_back(unions);
  texts.push_back("SELECT " + std::string(70, '(') + "a" + std::string(70, ')') + " FROM t");
  for (const char* corpus : {"/tests/security/bypass_corpus.tsv", "/tests/security/allowed_reads.tsv"}) {
    std::ifstream in(std::string(PGW_SOURCE_DIR) + corpus);
    ASSERT_TRUE(in.good()) << corpus;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      texts.push_back(line.substr(line.rfind('\t') + 1));
    }
  }
  size_t compared = 0;
  size_t from_tree = 0;  // how many took the path under test rather than libpg_query's own
  simdjson::dom::parser json;
  for (const auto& text : texts) {
    PgQueryFingerprintResult expected = pg_query_fingerprint(text.c_str());
    const auto a = analysis::analyzeUncached(text);
    if (expected.error == nullptr && a->ok) {
      ++compared;
      PgQueryParseResult parsed = pg_query_parse(text.c_str());
      simdjson::dom::element root;
      uint64_t fp = 0;
      if (json.parse(simdjson::padded_string(std::string_view(parsed.parse_tree))).get(root) ==
              simdjson::SUCCESS &&
          analysis::pgjson::fingerprintSelects(root, fp)) {
        ++from_tree;
        EXPECT_EQ(fp, expected.fingerprint) << text;
      }
      pg_query_free_parse_result(parsed);
      EXPECT_EQ(a->fingerprint, expected.fingerprint) << text;
      EXPECT_EQ(a->fingerprint_hex, expected.fingerprint_str) << text;
    }
    pg_query_free_fingerprint_result(expected);
  }
  EXPECT_GT(compared, 200u);
  EXPECT_GE(from_tree, 120u);
}

}  // namespace
}  // namespace pgwarden::guards
