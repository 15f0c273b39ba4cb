// The exposition byte for byte as prometheus::TextSerializer writes it through the registry:
// HELP/TYPE lines in registration order, escaping, histogram series, number formatting, series
// order.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "metrics/metrics.h"

namespace pgwarden::metrics {
namespace {

// A registry with one family of each kind and values that exercise every formatting rule.
struct Small {
  Registry r;
  Small() {
    r.counterFamily("demo_requests_total", "Requests by code.", {"code"}).with({"200"}).inc(7);
    r.gauge("demo_queue_depth", "Items\\waiting\nnow.").set(-3);
    Histogram& h = r.histogramFamily("demo_latency_seconds", "Latency \"in\" seconds.", {"path"},
                                     {0.005, 1, 2.5})
                       .with({"/a"});
    h.observe(0.001);
    h.observe(1);
    h.observe(10);
  }
};

TEST(Exposition, PrometheusTextIsExact) {
  Small s;
  // Families in registration order, series by label values, labels by name; a histogram's
  // _count and _sum come before its buckets, and bounds print as numbers (le="1").
  const std::string expected =
      "# HELP pgwarden_metrics_series_overflow_total Label-set lookups that exceeded their "
      "family's series cap and were counted under label values \"other\".\n"
      "# TYPE pgwarden_metrics_series_overflow_total counter\n"
      "pgwarden_metrics_series_overflow_total{family=\"demo_latency_seconds\"} 0\n"
      "pgwarden_metrics_series_overflow_total{family=\"demo_queue_depth\"} 0\n"
      "pgwarden_metrics_series_overflow_total{family=\"demo_requests_total\"} 0\n"
      "# HELP demo_requests_total Requests by code.\n"
      "# TYPE demo_requests_total counter\n"
      "demo_requests_total{code=\"200\"} 7\n"
      "# HELP demo_queue_depth Items\\\\waiting\\nnow.\n"
      "# TYPE demo_queue_depth gauge\n"
      "demo_queue_depth -3\n"
      "# HELP demo_latency_seconds Latency \"in\" seconds.\n"
      "# TYPE demo_latency_seconds histogram\n"
      "demo_latency_seconds_count{path=\"/a\"} 3\n"
      "demo_latency_seconds_sum{path=\"/a\"} 11.001\n"
      "demo_latency_seconds_bucket{path=\"/a\",le=\"0.005\"} 1\n"
      "demo_latency_seconds_bucket{path=\"/a\",le=\"1\"} 2\n"
      "demo_latency_seconds_bucket{path=\"/a\",le=\"2.5\"} 2\n"
      "demo_latency_seconds_bucket{path=\"/a\",le=\"+Inf\"} 3\n";
  EXPECT_EQ(s.r.render(), expected);
}

TEST(Exposition, LabelValuesEscapeBackslashQuoteAndNewline) {
  Registry r;
  r.counterFamily("t_esc_total", "x", {"v"}).with({"say \"hi\"\\\n\tend"}).inc();
  EXPECT_NE(r.render().find("t_esc_total{v=\"say \\\"hi\\\"\\\\\\n\tend\"} 1\n"),
            std::string::npos)
      << r.render();
}

TEST(Exposition, NumbersAndSpecialValues) {
  Registry r;
  r.callbackFamily("t_values", "x", MetricType::kGauge, {"v"}, [](SampleSink& s) {
    s.add({"a"}, 0);
    s.add({"b"}, 1.5);
    s.add({"c"}, 0.1);
    s.add({"d"}, 1e-06);
    s.add({"e"}, 1700000000.25);
    s.add({"f"}, INFINITY);
    s.add({"g"}, -INFINITY);
    s.add({"h"}, 9007199254740992.0);  // 2^53, in full: counters are doubles, exact up to here
  });
  const std::string text = r.render();
  for (const char* line : {"t_values{v=\"a\"} 0\n", "t_values{v=\"b\"} 1.5\n",
                           "t_values{v=\"c\"} 0.1\n", "t_values{v=\"d\"} 1e-06\n",
                           "t_values{v=\"e\"} 1700000000.25\n", "t_values{v=\"f\"} +Inf\n",
                           "t_values{v=\"g\"} -Inf\n", "t_values{v=\"h\"} 9007199254740992\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

TEST(Exposition, UnlabeledSeriesHaveNoBraces) {
  Registry r;
  r.counter("t_plain_total", "x").inc(3);
  r.histogram("t_plain_seconds", "x", {1}).observe(0.5);
  std::string text = r.render();
  EXPECT_NE(text.find("\nt_plain_total 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nt_plain_seconds_bucket{le=\"1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nt_plain_seconds_sum 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nt_plain_seconds_count 1\n"), std::string::npos) << text;
}

TEST(Exposition, EmptyFamiliesStillDeclareThemselves) {
  Registry r;
  r.counterFamily("t_none_total", "Nothing yet.", {"group"});
  std::string text = r.render();
  EXPECT_NE(text.find("# HELP t_none_total Nothing yet.\n# TYPE t_none_total counter\n"),
            std::string::npos);
  EXPECT_EQ(text.find("t_none_total{"), std::string::npos);
}

TEST(Exposition, HistogramCountEqualsInfBucketInEveryScrape) {
  Metrics m(BuildInfo{"v", "s"});
  HistogramFamily& f = m.statement_duration;
  for (int i = 0; i < 1000; ++i) {
    f.with({"g" + std::to_string(i % 7), i % 2 ? "ok" : "error"}).observe(i * 0.0137);
  }
  std::istringstream in(m.registry.render());
  std::string line;
  std::map<std::string, std::string> inf, count;
  while (std::getline(in, line)) {
    if (line.rfind("pgwarden_statement_duration_seconds_bucket{", 0) == 0 &&
        line.find("le=\"+Inf\"") != std::string::npos) {
      std::string labels = line.substr(line.find('{'), line.find(",le=") - line.find('{'));
      inf[labels] = line.substr(line.rfind(' ') + 1);
    } else if (line.rfind("pgwarden_statement_duration_seconds_count{", 0) == 0) {
      std::string labels = line.substr(line.find('{'), line.find('}') - line.find('{'));
      count[labels] = line.substr(line.rfind(' ') + 1);
    }
  }
  EXPECT_EQ(inf.size(), 14u);
  EXPECT_EQ(inf, count);
}

TEST(Exposition, BucketsAreCumulativeAndOrdered) {
  Registry r;
  Histogram& h = r.histogram("t_cum_seconds", "x", kStatementDurationBuckets);
  for (int i = 0; i < 200; ++i) h.observe(std::pow(10.0, -4.5 + i * 0.03));
  std::istringstream in(r.render());
  std::string line;
  double prev_le = -1;
  uint64_t prev_count = 0;
  size_t buckets = 0;
  while (std::getline(in, line)) {
    if (line.rfind("t_cum_seconds_bucket{", 0) != 0) continue;
    size_t q = line.find("le=\"") + 4;
    std::string le = line.substr(q, line.find('"', q) - q);
    double bound = le == "+Inf" ? INFINITY : std::stod(le);
    uint64_t count = std::stoull(line.substr(line.rfind(' ') + 1));
    EXPECT_GT(bound, prev_le);
    EXPECT_GE(count, prev_count);
    prev_le = bound;
    prev_count = count;
    ++buckets;
  }
  EXPECT_EQ(buckets, kStatementDurationBuckets.size() + 1);
  EXPECT_EQ(prev_count, 200u);
}

TEST(Exposition, FullCatalogueHasHelpAndTypeForEveryFamilyOnce) {
  Metrics m(BuildInfo{"v", "s"});
  std::istringstream in(m.registry.render());
  std::string line;
  std::map<std::string, int> help, type;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) ++help[line.substr(7, line.find(' ', 7) - 7)];
    if (line.rfind("# TYPE ", 0) == 0) ++type[line.substr(7, line.find(' ', 7) - 7)];
    if (!line.empty() && line[0] != '#') {
      // pgwarden's own families, and the process figures under the standard process_* names.
      EXPECT_TRUE(line.rfind("pgwarden_", 0) == 0 || line.rfind("process_", 0) == 0) << line;
    }
  }
  EXPECT_EQ(help, type);
  for (const auto& [name, n] : help) EXPECT_EQ(n, 1) << name;
  for (const char* name : {"pgwarden_client_connections",
                           "pgwarden_server_connections",
                           "pgwarden_client_connections_accepted_total",
                           "pgwarden_client_connections_rejected_total",
                           "pgwarden_statements_total",
                           "pgwarden_statement_duration_seconds",
                           "pgwarden_guard_duration_seconds",
                           "pgwarden_rows_returned_total",
                           "pgwarden_statements_truncated_total",
                           "pgwarden_guard_decisions_total",
                           "pgwarden_budget_exhausted_total",
                           "pgwarden_conversations_live",
                           "pgwarden_upstream_connect_errors_total",
                           "pgwarden_upstream_server_errors_total",
                           "pgwarden_upstream_cancel_requests_total",
                           "pgwarden_history_records_written_total",
                           "pgwarden_history_records_dropped_total",
                           "pgwarden_history_write_errors_total",
                           "pgwarden_history_queue_depth",
                           "pgwarden_external_guard_calls_total",
                           "pgwarden_external_guard_failures_total",
                           "pgwarden_external_guard_timeouts_total",
                           "pgwarden_external_guard_duration_seconds",
                           "pgwarden_process_resident_memory_bytes",
                           "pgwarden_process_open_fds",
                           "pgwarden_process_cpu_seconds_total",
                           "pgwarden_process_start_time_seconds",
                           "pgwarden_build_info"}) {
    EXPECT_EQ(help.count(name), 1u) << name;
  }
}

}  // namespace
}  // namespace pgwarden::metrics
