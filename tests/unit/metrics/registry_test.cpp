// The registry: series identity, bucket math, the series cap, name validation, callback
// families, and updates from many threads summing exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "metrics/metrics.h"

namespace pgwarden::metrics {
namespace {

TEST(Counter, IncrementsAndReads) {
  Registry r;
  Counter& c = r.counter("t_events_total", "Events.");
  EXPECT_EQ(c.value(), 0u);
  c.inc();
  c.inc(41);
  EXPECT_EQ(c.value(), 42u);
}

TEST(Gauge, SetIncDec) {
  Registry r;
  Gauge& g = r.gauge("t_depth", "Depth.");
  g.set(10);
  g.inc(5);
  g.dec(20);
  EXPECT_EQ(g.value(), -5);
}

TEST(Family, WithReturnsTheSameSeriesForTheSameLabels) {
  Registry r;
  CounterFamily& f = r.counterFamily("t_requests_total", "Requests.", {"group", "outcome"});
  Counter& a = f.with({"agents", "ok"});
  Counter& b = f.with({"agents", "ok"});
  Counter& c = f.with({"agents", "denied"});
  std::vector<std::string> dynamic = {"agents", "ok"};
  Counter& d = f.with(dynamic);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(&a, &d);
  EXPECT_NE(&a, &c);
  a.inc();
  // References stay valid while many more series are created (no rehash moves them).
  for (int i = 0; i < 500; ++i) f.with({"g" + std::to_string(i), "ok"}).inc();
  a.inc();
  EXPECT_EQ(f.with({"agents", "ok"}).value(), 2u);
  EXPECT_EQ(f.seriesCount(), 502u);
}

TEST(Family, LabelValuesDoNotCollideAcrossPositions) {
  Registry r;
  CounterFamily& f = r.counterFamily("t_pairs_total", "Pairs.", {"a", "b"});
  // Joined naively these would be the same key.
  EXPECT_NE(&f.with({"x,y", "z"}), &f.with({"x", "y,z"}));
  EXPECT_NE(&f.with({"", "xy"}), &f.with({"xy", ""}));
}

TEST(Histogram, BucketBoundariesFollowLeSemantics) {
  Registry r;
  Histogram& h = r.histogram("t_latency_seconds", "Latency.", {0.1, 0.5, 1});
  h.observe(0.05);  // <= 0.1
  h.observe(0.1);   // == bound: belongs to le=0.1
  h.observe(0.1000001);
  h.observe(0.5);
  h.observe(0.7);
  h.observe(1);
  h.observe(3);             // only +Inf
  h.observe(-1);            // below every bound: first bucket
  h.observe(std::nan(""));  // ignored
  Histogram::Snapshot s = h.snapshot();
  ASSERT_EQ(s.cumulative.size(), 4u);
  EXPECT_EQ(s.cumulative[0], 3u);  // -1, 0.05, 0.1
  EXPECT_EQ(s.cumulative[1], 5u);  // + 0.1000001, 0.5
  EXPECT_EQ(s.cumulative[2], 7u);  // + 0.7, 1
  EXPECT_EQ(s.cumulative[3], 8u);  // + 3
  EXPECT_EQ(s.count, 8u);
  EXPECT_NEAR(s.sum, 0.05 + 0.1 + 0.1000001 + 0.5 + 0.7 + 1 + 3 - 1, 1e-9);
}

TEST(Histogram, ObservesDurationsInSeconds) {
  Registry r;
  Histogram& h = r.histogram("t_wait_seconds", "Wait.", kStatementDurationBuckets);
  h.observe(std::chrono::microseconds(100));  // exactly the first bound
  h.observe(std::chrono::milliseconds(30000));
  h.observe(std::chrono::seconds(31));
  Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative.front(), 1u);
  EXPECT_EQ(s.cumulative[s.cumulative.size() - 2], 2u);  // le=30
  EXPECT_EQ(s.cumulative.back(), 3u);
  EXPECT_NEAR(s.sum, 0.0001 + 30 + 31, 1e-9);
}

TEST(Histogram, DefaultBucketsSpanTheDocumentedRanges) {
  EXPECT_DOUBLE_EQ(kStatementDurationBuckets.front(), 0.0001);
  EXPECT_DOUBLE_EQ(kStatementDurationBuckets.back(), 30);
  for (const auto* b :
       {&kStatementDurationBuckets, &kGuardDurationBuckets, &kExternalCallBuckets}) {
    EXPECT_TRUE(std::is_sorted(b->begin(), b->end()));
    EXPECT_EQ(std::adjacent_find(b->begin(), b->end()), b->end());
  }
}

TEST(Family, SeriesBeyondTheCapGoToOtherAndAreCounted) {
  Registry r;
  CounterFamily& f = r.counterFamily("t_capped_total", "Capped.", {"code"}, 3);
  f.with({"a"}).inc();
  f.with({"b"}).inc();
  f.with({"c"}).inc();
  Counter& d = f.with({"d"});
  Counter& e = f.with({"e"});
  EXPECT_EQ(&d, &e);  // both are the "other" series
  d.inc();
  e.inc();
  EXPECT_EQ(f.seriesCount(), 4u);             // three plus "other"
  EXPECT_EQ(&f.with({"a"}), &f.with({"a"}));  // existing series are still found
  EXPECT_EQ(f.with({std::string(kOtherLabelValue)}).value(), 2u);
  EXPECT_EQ(r.overflowFamily().with({"t_capped_total"}).value(), 2u);
  std::string text = r.render();
  EXPECT_NE(text.find("t_capped_total{code=\"other\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pgwarden_metrics_series_overflow_total{family=\"t_capped_total\"} 2\n"),
            std::string::npos)
      << text;
}

TEST(Family, AGenuineOtherLabelSetIsNotRenderedTwice) {
  Registry r;
  CounterFamily& f = r.counterFamily("t_other_total", "Other.", {"code"}, 1);
  f.with({"other"}).inc();  // a real label value that happens to be "other", under the cap
  f.with({"x"}).inc();      // over the cap: lands in the same series
  EXPECT_EQ(f.seriesCount(), 1u);
  EXPECT_EQ(f.with({"other"}).value(), 2u);
}

TEST(Family, WrongNumberOfLabelValuesLandsInOther) {
  Registry r;
  CounterFamily& f = r.counterFamily("t_arity_total", "Arity.", {"a", "b"});
  Counter& c = f.with({"only-one"});
  c.inc();
  EXPECT_EQ(&c, &f.with({"other", "other"}));
  EXPECT_EQ(r.overflowFamily().with({"t_arity_total"}).value(), 1u);
}

TEST(Family, InvalidUtf8IsReplacedAndFindsOneSeries) {
  Registry r;
  CounterFamily& f = r.counterFamily("t_utf8_total", "UTF-8.", {"pool"});
  Counter& a = f.with({std::string_view("db\xff\xfe", 4)});
  Counter& b = f.with({"db??"});
  EXPECT_EQ(&a, &b);
  std::string text = r.render();
  EXPECT_NE(text.find("t_utf8_total{pool=\"db??\"} 0"), std::string::npos) << text;
}

TEST(Sanitize, KeepsValidUtf8AndReplacesTheRest) {
  EXPECT_EQ(sanitizeUtf8("plain"), "plain");
  EXPECT_EQ(sanitizeUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(sanitizeUtf8("\xc3"), "?");                 // truncated sequence
  EXPECT_EQ(sanitizeUtf8("\xc0\xaf"), "??");            // overlong '/'
  EXPECT_EQ(sanitizeUtf8("\xed\xa0\x80"), "???");       // surrogate
  EXPECT_EQ(sanitizeUtf8("\xf4\x90\x80\x80"), "????");  // above U+10FFFF
  EXPECT_EQ(sanitizeUtf8(std::string_view("a\0b", 3)), "a?b");
}

TEST(Registry, RejectsBadNamesAndCollisions) {
  Registry r;
  EXPECT_THROW(r.counter("t_no_suffix", "x"), std::invalid_argument);
  EXPECT_THROW(r.counter("_total", "x"), std::invalid_argument);
  EXPECT_THROW(r.gauge("t_gauge_total", "x"), std::invalid_argument);
  EXPECT_THROW(r.gauge("1abc", "x"), std::invalid_argument);
  EXPECT_THROW(r.gauge("t-dash", "x"), std::invalid_argument);
  EXPECT_THROW(r.gaugeFamily("t_l1", "x", {"bad-label"}), std::invalid_argument);
  EXPECT_THROW(r.gaugeFamily("t_l2", "x", {"__reserved"}), std::invalid_argument);
  EXPECT_THROW(r.gaugeFamily("t_l3", "x", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(r.histogramFamily("t_h1", "x", {"le"}, {1}), std::invalid_argument);
  EXPECT_THROW(r.histogramFamily("t_h2", "x", {}, {}), std::invalid_argument);
  EXPECT_THROW(r.histogramFamily("t_h3", "x", {}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(r.histogramFamily("t_h4", "x", {}, {2, 1}), std::invalid_argument);
  EXPECT_THROW(r.histogramFamily("t_h5", "x", {}, {1, INFINITY}), std::invalid_argument);
  EXPECT_THROW(r.callbackFamily("t_cb", "x", MetricType::kHistogram, {}), std::invalid_argument);
  r.counter("t_things_total", "x");
  EXPECT_THROW(r.counter("t_things_total", "x"), std::invalid_argument);
  EXPECT_THROW(r.gauge("t_things", "x"), std::invalid_argument);  // OpenMetrics family name
  r.histogram("t_size_bytes", "x", {1});
  EXPECT_THROW(r.gauge("t_size_bytes_count", "x"), std::invalid_argument);
  EXPECT_THROW(r.gauge("t_size_bytes_bucket", "x"), std::invalid_argument);
  EXPECT_NO_THROW(r.gauge("t_size", "x"));
}

TEST(CallbackFamily, SumsDuplicatesCapsAndSortsSamples) {
  Registry r;
  CallbackFamily& f =
      r.callbackFamily("t_conns", "Connections.", MetricType::kGauge, {"state"}, {}, 2);
  EXPECT_EQ(f.seriesCount(), 0u);
  f.setCollector([](SampleSink& s) {
    s.add({"idle"}, 1);
    s.add({"active"}, 2);
    s.add({"idle"}, 3);
    s.add({"waiting"}, 9);  // third label set: over the cap of 2
    s.add({"a", "b"}, 1);   // wrong arity
  });
  std::string text = r.render();
  EXPECT_NE(text.find("t_conns{state=\"active\"} 2\nt_conns{state=\"idle\"} 4\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("waiting"), std::string::npos);
  EXPECT_EQ(r.overflowFamily().with({"t_conns"}).value(), 2u);
}

TEST(CallbackFamily, CollectorRunsAtEveryRender) {
  Registry r;
  int calls = 0;
  r.callbackFamily("t_depth_now", "Depth.", MetricType::kGauge, {}, [&](SampleSink& s) {
    ++calls;
    s.add({}, calls * 10);
  });
  EXPECT_NE(r.render().find("t_depth_now 10\n"), std::string::npos);
  EXPECT_NE(r.render().find("t_depth_now 20\n"), std::string::npos);
}

TEST(Concurrency, IncrementsFromManyThreadsSumExactly) {
  Registry r;
  CounterFamily& f = r.counterFamily("t_conc_total", "Concurrent.", {"worker"});
  Counter& shared = r.counter("t_shared_total", "Shared.");
  Histogram& h = r.histogram("t_conc_seconds", "Concurrent.", {0.001, 0.01, 0.1});
  Gauge& g = r.gauge("t_conc_gauge", "Concurrent.");
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100000;
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      // Each thread resolves series itself, racing the others on first creation.
      Counter& mine = f.with({"w" + std::to_string(t % 4)});
      for (int i = 0; i < kPerThread; ++i) {
        shared.inc();
        mine.inc();
        h.observe((i % 3) == 0 ? 0.0005 : 0.05);
        g.inc();
        g.dec();
      }
    });
  }
  // Renders run concurrently with the updates and must not tear or crash.
  std::thread scraper([&] {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < 50; ++i) (void)r.render();
  });
  go.store(true);
  for (auto& th : threads) th.join();
  scraper.join();
  EXPECT_EQ(shared.value(), uint64_t{kThreads} * kPerThread);
  uint64_t sum = 0;
  for (int w = 0; w < 4; ++w) sum += f.with({"w" + std::to_string(w)}).value();
  EXPECT_EQ(sum, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(f.seriesCount(), 4u);
  Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.count, uint64_t{kThreads} * kPerThread);
  uint64_t small = uint64_t{kThreads} * ((kPerThread + 2) / 3);
  EXPECT_EQ(s.cumulative[0], small);
  EXPECT_EQ(s.cumulative[2], s.count);
  EXPECT_NEAR(s.sum, small * 0.0005 + (s.count - small) * 0.05, 1e-6 * s.count);
  EXPECT_EQ(g.value(), 0);
}

TEST(Catalogue, GroupSeriesCachesAndResolvesTheRightSeries) {
  Metrics m(BuildInfo{"1.2.3", "abc"});
  GroupSeries g(m, "agents");
  Counter& ok = g.statements(Outcome::kOk, StatementIntent::kLookup);
  EXPECT_EQ(&ok, &g.statements(Outcome::kOk, StatementIntent::kLookup));
  EXPECT_EQ(&ok, &m.statements.with({"agents", "ok", "lookup", "primary"}));
  EXPECT_EQ(&g.statements(Outcome::kDenied, StatementIntent::kOther),
            &m.statements.with({"agents", "denied", "other", "primary"}));
  // Each host its own series, cached by its slot; past the slots, resolved each time.
  Counter& replica = g.statements(Outcome::kOk, StatementIntent::kLookup, 2, "10.0.0.2:5432");
  EXPECT_NE(&replica, &ok);
  EXPECT_EQ(&replica, &m.statements.with({"agents", "ok", "lookup", "10.0.0.2:5432"}));
  EXPECT_EQ(&replica, &g.statements(Outcome::kOk, StatementIntent::kLookup, 2, "10.0.0.2:5432"));
  EXPECT_EQ(
      &g.statements(Outcome::kDenied, StatementIntent::kLookup, GroupSeries::kHostNone, "none"),
      &m.statements.with({"agents", "denied", "lookup", "none"}));
  EXPECT_EQ(&g.statements(Outcome::kOk, StatementIntent::kLookup, GroupSeries::kHostSlots, "h:1"),
            &m.statements.with({"agents", "ok", "lookup", "h:1"}));
  EXPECT_EQ(&g.duration(Outcome::kError), &m.statement_duration.with({"agents", "error"}));
  EXPECT_EQ(&g.rowsReturned(), &m.rows_returned.with({"agents"}));
  // A second GroupSeries for the same group (a config reload) shares the series.
  GroupSeries again(m, "agents");
  EXPECT_EQ(&ok, &again.statements(Outcome::kOk, StatementIntent::kLookup));
}

TEST(Catalogue, LabelNamesMatchTheEnums) {
  EXPECT_STREQ(outcomeName(Outcome::kOk), "ok");
  EXPECT_STREQ(outcomeName(Outcome::kError), "error");
  EXPECT_STREQ(outcomeName(Outcome::kDenied), "denied");
  EXPECT_STREQ(outcomeName(Outcome::kCancelled), "cancelled");
  EXPECT_STREQ(outcomeName(Outcome::kClientGone), "client_gone");
  EXPECT_STREQ(outcomeName(Outcome::kBudget), "budget");
  EXPECT_STREQ(intentLabel(StatementIntent::kCatalog), "catalog");
  EXPECT_STREQ(intentLabel(StatementIntent::kAggregation), "aggregation");
  EXPECT_STREQ(intentLabel(StatementIntent::kOther), "other");
}

TEST(Catalogue, HistorySourceIsReadAtScrapeTime) {
  Metrics m(BuildInfo{"1.2.3", "abc"});
  HistorySnapshot now{10, 1, 0, 5};
  m.setHistorySource("sqlite", [&] { return now; });
  std::string a = m.registry.render();
  EXPECT_NE(a.find("pgwarden_history_records_written_total{store=\"sqlite\"} 10\n"),
            std::string::npos);
  EXPECT_NE(a.find("pgwarden_history_queue_depth{store=\"sqlite\"} 5\n"), std::string::npos);
  now = {25, 3, 1, 0};
  std::string b = m.registry.render();
  EXPECT_NE(b.find("pgwarden_history_records_written_total{store=\"sqlite\"} 25\n"),
            std::string::npos);
  EXPECT_NE(b.find("pgwarden_history_records_dropped_total{store=\"sqlite\"} 3\n"),
            std::string::npos);
  EXPECT_NE(b.find("pgwarden_history_write_errors_total{store=\"sqlite\"} 1\n"), std::string::npos);
  EXPECT_NE(b.find("pgwarden_history_queue_depth{store=\"sqlite\"} 0\n"), std::string::npos);
}

TEST(Catalogue, BuildInfoCarriesVersionAndSha) {
  Metrics m(BuildInfo{"1.2.3", "deadbeef0123"});
  std::string text = m.registry.render();
  // prometheus-cpp orders a series' labels by name.
  EXPECT_NE(text.find("pgwarden_build_info{git_sha=\"deadbeef0123\",version=\"1.2.3\"} 1\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace pgwarden::metrics
