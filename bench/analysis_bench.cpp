// Guard analysis cost per statement (and per pgbench statement with a fresh literal, which the
// shape cache serves). Targets (reported, never asserted): <= 10 us on a parse-cache
// miss for a one-table SELECT, <= 1 us on a hit. A miss is libpg_query's parse (JSON) plus its
// fingerprint plus pgwarden's walk of the tree; the libpg_query calls alone are measured too, so
// the walk's share can be read off. Reads are fingerprinted from the parsed tree (BM_FingerprintFromTree),
// other statements by pg_query_fingerprint, which parses the text again.
#include <benchmark/benchmark.h>
#include <pg_query.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/pg_json.h"
#include "analysis/shape.h"
#include "guards/policy.h"

namespace {

using namespace pgwarden::guards;
using namespace pgwarden::analysis;

const char* kOneTable =
    "SELECT id, carrier, status FROM public.fct_shipments WHERE ship_date >= '2024-01-01' AND status = 'DELAYED' "
    "LIMIT 100";
const char* kJoinWithCte =
    "WITH recent AS (SELECT * FROM public.fct_shipments WHERE ship_date >= current_date - 7) "
    "SELECT c.name, r.status, count(*) FROM recent r JOIN public.carriers c ON c.code = r.carrier "
    "JOIN public.regions g ON g.id = r.region GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 20";

// A cache miss as the session meets it: lookup, analysis, insertion, eviction. Distinct texts (a
// trailing comment with a counter) so that every call misses.
void BM_AnalyzeMiss(benchmark::State& state, const char* sql) {
  std::vector<std::string> texts;
  for (int i = 0; i < 8192; ++i) texts.push_back(std::string(sql) + " -- " + std::to_string(i));
  Analyzer analyzer(1024);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(analyzer.analyze(texts[i++ % texts.size()]));
  }
  state.counters["hit_ratio"] = static_cast<double>(analyzer.cacheHits()) /
                                static_cast<double>(analyzer.cacheHits() + analyzer.cacheMisses());
}
BENCHMARK_CAPTURE(BM_AnalyzeMiss, one_table, kOneTable);
BENCHMARK_CAPTURE(BM_AnalyzeMiss, join_cte, kJoinWithCte);

void BM_AnalyzeHit(benchmark::State& state, const char* sql) {
  Analyzer analyzer(1024);
  const std::string text = sql;
  analyzer.analyze(text);
  for (auto _ : state) benchmark::DoNotOptimize(analyzer.analyze(text));
}
BENCHMARK_CAPTURE(BM_AnalyzeHit, one_table, kOneTable);
BENCHMARK_CAPTURE(BM_AnalyzeHit, join_cte, kJoinWithCte);

// pgbench traffic: the same statement with a new literal each time, so the exact-text cache
// misses every time. Through the Analyzer the shape cache serves it from a template; the
// uncached case is what each call cost before the shape cache (the exact cache's miss path).
const char* kPgbenchSelect = "SELECT abalance FROM pgbench_accounts WHERE aid = ";
const char* kPgbenchUpdate = "UPDATE pgbench_accounts SET abalance = abalance + 1234 WHERE aid = ";

std::vector<std::string> freshLiteralTexts(const char* prefix) {
  std::vector<std::string> texts;
  for (int i = 0; i < 8192; ++i) texts.push_back(std::string(prefix) + std::to_string(100 + i * 12 % 99991) + ";");
  return texts;
}

void BM_AnalyzeFreshLiteral(benchmark::State& state, const char* prefix) {
  const std::vector<std::string> texts = freshLiteralTexts(prefix);
  Analyzer analyzer(1024);
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(analyzer.analyze(texts[i++ % texts.size()]));
  state.counters["shape_hit_ratio"] = static_cast<double>(analyzer.shapeHits()) /
                                      static_cast<double>(analyzer.cacheMisses());
}
BENCHMARK_CAPTURE(BM_AnalyzeFreshLiteral, pgbench_select, kPgbenchSelect);
BENCHMARK_CAPTURE(BM_AnalyzeFreshLiteral, pgbench_update, kPgbenchUpdate);

void BM_AnalyzeFreshLiteralUncached(benchmark::State& state, const char* prefix) {
  const std::vector<std::string> texts = freshLiteralTexts(prefix);
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(analyzeUncached(texts[i++ % texts.size()]));
}
BENCHMARK_CAPTURE(BM_AnalyzeFreshLiteralUncached, pgbench_select, kPgbenchSelect);
BENCHMARK_CAPTURE(BM_AnalyzeFreshLiteralUncached, pgbench_update, kPgbenchUpdate);

// The shape lexer alone: what every exact-cache miss now pays before a parse.
void BM_LexShape(benchmark::State& state, const char* sql) {
  const std::string text = sql;
  Shape shape;
  for (auto _ : state) benchmark::DoNotOptimize(lexShape(text, shape));
}
BENCHMARK_CAPTURE(BM_LexShape, one_table, kOneTable);
BENCHMARK_CAPTURE(BM_LexShape, join_cte, kJoinWithCte);

// The libpg_query calls a miss makes, for reference.
void BM_PgQueryParseJson(benchmark::State& state, const char* sql) {
  const char* text = sql;
  for (auto _ : state) {
    PgQueryParseResult r = pg_query_parse(text);
    benchmark::DoNotOptimize(r.parse_tree);
    pg_query_free_parse_result(r);
  }
}
BENCHMARK_CAPTURE(BM_PgQueryParseJson, one_table, kOneTable);
BENCHMARK_CAPTURE(BM_PgQueryParseJson, join_cte, kJoinWithCte);

void BM_PgQueryFingerprint(benchmark::State& state, const char* sql) {
  const char* text = sql;
  for (auto _ : state) {
    PgQueryFingerprintResult r = pg_query_fingerprint(text);
    benchmark::DoNotOptimize(r.fingerprint);
    pg_query_free_fingerprint_result(r);
  }
}
BENCHMARK_CAPTURE(BM_PgQueryFingerprint, one_table, kOneTable);
BENCHMARK_CAPTURE(BM_PgQueryFingerprint, join_cte, kJoinWithCte);

// What a miss pays for the fingerprint instead: libpg_query's token rules over the JSON tree the
// analysis has already parsed (no second parse).
void BM_FingerprintFromTree(benchmark::State& state, const char* sql) {
  PgQueryParseResult r = pg_query_parse(sql);
  const simdjson::padded_string json{std::string_view(r.parse_tree)};
  pg_query_free_parse_result(r);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json).get(root) != simdjson::SUCCESS) {
    state.SkipWithError("JSON parse failed");
    return;
  }
  uint64_t fp = 0;
  for (auto _ : state) {
    if (!pgjson::fingerprintSelects(root, fp)) state.SkipWithError("not fingerprinted from the tree");
    benchmark::DoNotOptimize(fp);
  }
}
BENCHMARK_CAPTURE(BM_FingerprintFromTree, one_table, kOneTable);
BENCHMARK_CAPTURE(BM_FingerprintFromTree, join_cte, kJoinWithCte);

const PolicyGroup& agents() {
  static const PolicyMap groups =
      parsePolicyGroups(YAML::LoadFile(std::string(PGW_SOURCE_DIR) + "/packaging/pgwarden.yaml")["groups"]);
  return *groups.at("agents");
}

std::shared_ptr<const TableStatsSnapshot> stats() {
  return TableStatsSnapshot::fromRows({{"public", "fct_shipments", "1000000", "ship_date,id", "date,bigint"},
                                       {"public", "carriers", "40", "code", "text"},
                                       {"public", "regions", "12", "id", "integer"}});
}

// The whole agents chain (read_only, multi_statement, functions, tables, require_predicate,
// row_limit) on an analysis already in the cache.
void BM_AgentsChain(benchmark::State& state, const char* sql) {
  const std::string text = sql;
  const auto analysis = analyzeUncached(text);
  const auto snapshot = stats();
  RequestContext ctx;
  for (auto _ : state) benchmark::DoNotOptimize(agents().evaluate(*analysis, text, ctx, snapshot.get()));
}
BENCHMARK_CAPTURE(BM_AgentsChain, one_table, kOneTable);
BENCHMARK_CAPTURE(BM_AgentsChain, join_cte, kJoinWithCte);

// What a repeated statement costs the session in total: cache hit + chain.
void BM_HitPlusChain(benchmark::State& state, const char* sql) {
  const std::string text = sql;
  Analyzer analyzer(1024);
  const auto snapshot = stats();
  RequestContext ctx;
  for (auto _ : state) {
    const auto a = analyzer.analyze(text);
    benchmark::DoNotOptimize(agents().evaluate(*a, text, ctx, snapshot.get()));
  }
}
BENCHMARK_CAPTURE(BM_HitPlusChain, one_table, kOneTable);
BENCHMARK_CAPTURE(BM_HitPlusChain, join_cte, kJoinWithCte);

}  // namespace

BENCHMARK_MAIN();
