// What a metric update costs on the statement path (a cached series: one prometheus-cpp update),
// what a label lookup costs when it is not cached, and how long a scrape of ~500 series takes
// to render on the event loop.
#include <benchmark/benchmark.h>

#include <string>

#include "metrics/metrics.h"

namespace {

using namespace pgwarden::metrics;
using pgwarden::Outcome;

void BM_CounterInc(benchmark::State& state) {
  static Registry registry;
  static Counter& c = registry.counter("bench_events_total", "Events.");
  for (auto _ : state) c.inc();
  benchmark::DoNotOptimize(c.value());
}
BENCHMARK(BM_CounterInc)->Threads(1)->Threads(2);

void BM_GaugeInc(benchmark::State& state) {
  static Registry registry;
  static Gauge& g = registry.gauge("bench_depth", "Depth.");
  for (auto _ : state) g.inc();
  benchmark::DoNotOptimize(g.value());
}
BENCHMARK(BM_GaugeInc);

void BM_HistogramObserve(benchmark::State& state) {
  static Registry registry;
  static Histogram& h =
      registry.histogram("bench_duration_seconds", "Duration.", kStatementDurationBuckets);
  // Values spread over the buckets, so the bucket search is not always the same branch.
  double values[64];
  for (int i = 0; i < 64; ++i) values[i] = 0.00005 * (1 << (i % 20));
  size_t i = 0;
  for (auto _ : state) h.observe(values[i++ & 63]);
  benchmark::DoNotOptimize(h.snapshot().count);
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(2);

// Everything the session does for one finished statement: count it, time it.
void BM_StatementPath(benchmark::State& state) {
  static Metrics metrics(BuildInfo{"bench", "bench"});
  static GroupSeries group(metrics, "agents");
  for (auto _ : state) {
    group.statements(Outcome::kOk, StatementIntent::kLookup).inc();
    group.duration(Outcome::kOk).observe(std::chrono::microseconds(850));
    group.rowsReturned().inc(20);
  }
}
BENCHMARK(BM_StatementPath);

// The cold path, for comparison: a with() lookup of an existing label set (mutex + map).
void BM_FamilyWithExisting(benchmark::State& state) {
  static Registry registry;
  static CounterFamily& f =
      registry.counterFamily("bench_decisions_total", "x", {"group", "guard", "action", "code"});
  for (int i = 0; i < 100; ++i) f.with({"g" + std::to_string(i % 10), "row_limit", "deny", "C"});
  for (auto _ : state) f.with({"g3", "row_limit", "deny", "C"}).inc();
}
BENCHMARK(BM_FamilyWithExisting);

// ~500 series: 400 counters and 100 histograms (each 18 buckets, _sum, _count), plus the
// catalogue's own families and the process figures.
Metrics& scrapeMetrics() {
  static Metrics* m = [] {
    auto* metrics = new Metrics(BuildInfo{"0.1.0", "0123456789ab"});
    const char* outcomes[] = {"ok", "denied", "error", "cancelled"};
    const char* intents[] = {"catalog", "lookup", "aggregation", "write", "other"};
    for (int g = 0; g < 20; ++g) {
      std::string group = "group_" + std::to_string(g);
      for (const char* o : outcomes) {
        for (const char* i : intents) metrics->statements.with({group, o, i, "primary"}).inc(g * 7 + 3);
      }
      for (int k = 0; k < 5; ++k) {
        const char* histogram_outcomes[] = {"ok", "denied", "error", "cancelled", "budget"};
        Histogram& h = metrics->statement_duration.with({group, histogram_outcomes[k]});
        for (int v = 0; v < 50; ++v) h.observe(0.0001 * (v + 1) * (k + 1));
      }
    }
    return metrics;
  }();
  return *m;
}

size_t seriesCount(Metrics& m) {
  return m.statements.seriesCount() + m.statement_duration.seriesCount();
}

void BM_RenderScrape(benchmark::State& state) {
  Metrics& m = scrapeMetrics();
  std::string out;
  size_t bytes = 0;
  for (auto _ : state) {
    out.clear();
    m.registry.render(out);
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["series"] = static_cast<double>(seriesCount(m));
  state.SetLabel("text 0.0.4");
}
BENCHMARK(BM_RenderScrape)->Unit(benchmark::kMicrosecond);

// The part of a scrape before serialization: every family's samples copied out of prometheus-cpp
// and the collectors run (the part that has to run on the loop, since collectors read its state).
void BM_CollectOnly(benchmark::State& state) {
  Metrics& m = scrapeMetrics();
  for (auto _ : state) {
    auto v = m.registry.collect();
    benchmark::DoNotOptimize(v.data());
  }
}
BENCHMARK(BM_CollectOnly)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
