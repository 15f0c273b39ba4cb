// Result screen cost. Targets (reported, never asserted): a result no screen can flag pays only
// maySpeak (tens of nanoseconds: shape and row count); a flagged one (UNKNOWN_VALUE on a count
// that came back zero: column lookup, known values, message, detail JSON) stays in the low
// microseconds, well below the round trip that produced it.
#include <benchmark/benchmark.h>

#include "screens/screen.h"

namespace {

using namespace pgwarden;

std::shared_ptr<const analysis::TableStatsSnapshot> stats() {
  std::vector<std::vector<std::string>> tables = {{"public", "fct_shipments", "1000000", "ship_date,id", "date,bigint"},
                                                  {"public", "pgbench_accounts", "100000", "aid", "integer"}};
  std::vector<std::vector<std::string>> columns = {
      {"public", "fct_shipments", "status", "text", "S", "", "", "{DELIVERED,DELAYED,RETURNED}",
       "{0.6,0.25,0.15}", "3", "", "true", "false"},
      {"public", "fct_shipments", "ship_date", "date", "D", "", "", "", "", "-0.01", "{2023-01-01,2026-06-30}",
       "true", "false"}};
  // Many more tables, as a real catalog has.
  for (int i = 0; i < 500; ++i) tables.push_back({"public", "t" + std::to_string(i), "1000", "", ""});
  return analysis::TableStatsSnapshot::fromRows(tables, columns);
}

void BM_ScreenFlagged(benchmark::State& state) {
  const auto snap = stats();
  const auto analysis = analysis::analyzeUncached(
      "SELECT count(*) FROM fct_shipments WHERE status = 'late' AND ship_date >= '2024-07-01'");
  screens::ScreenInput in;
  in.statement = &analysis->statements[0];
  in.result = {1, true, false, -1};
  in.stats = snap.get();
  size_t found = 0;
  for (auto _ : state) {
    auto v = screens::screenResult(in);
    found += v.size();
    benchmark::DoNotOptimize(v);
  }
  if (found != static_cast<size_t>(state.iterations())) state.SkipWithError("expected one warning per run");
}
BENCHMARK(BM_ScreenFlagged);

void BM_ScreenNotFlagged(benchmark::State& state) {
  const auto analysis =
      analysis::analyzeUncached("SELECT abalance FROM pgbench_accounts WHERE aid = $1");
  const screens::ResultSummary one_row{1, false, false, -1};
  for (auto _ : state) benchmark::DoNotOptimize(screens::maySpeak(analysis->statements[0], one_row));
}
BENCHMARK(BM_ScreenNotFlagged);

}  // namespace

BENCHMARK_MAIN();
