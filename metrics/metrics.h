// pgwarden's metrics: a small registry with Prometheus text (0.0.4) / OpenMetrics (1.0.0)
// exposition, and the `Metrics` catalogue of every family the daemon exports. Families are
// registered once at start-up; the hot path updates a cached series with one relaxed atomic
// operation (no lock, no allocation, no formatting).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::daemon::metrics {

enum class Format { kPrometheusText, kOpenMetrics };
const char* contentType(Format format);
// Picks the format a scraper's Accept header asks for: OpenMetrics when it lists
// application/openmetrics-text with a non-zero q, the 0.0.4 text format otherwise.
Format negotiateFormat(std::string_view accept_header);

enum class MetricType { kCounter, kGauge, kHistogram };
const char* typeName(MetricType type);

// Every family holds at most this many label sets unless told otherwise; further label sets
// share one series whose label values are all kOtherLabelValue, and each such update is counted
// in pgwarden_metrics_series_overflow_total{family}.
inline constexpr size_t kDefaultMaxSeries = 1000;
inline constexpr size_t kDefaultMaxHistogramSeries = 200;
inline constexpr std::string_view kOtherLabelValue = "other";

// Bucket upper bounds in seconds (the +Inf bucket is implicit).
extern const std::vector<double> kStatementDurationBuckets;  // 100 us .. 30 s
extern const std::vector<double> kGuardDurationBuckets;      // 1 us .. 5 s
extern const std::vector<double> kExternalCallBuckets;       // 1 ms .. 10 s

// A monotonically increasing count.
class Counter {
 public:
  void inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down (queue depth, live conversations).
class Gauge {
 public:
  void set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void inc(int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  void dec(int64_t n = 1) { value_.fetch_sub(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Fixed-bucket histogram. Buckets are stored per bucket (not cumulative) so observe() touches
// one bucket; the exposition accumulates them and derives _count from the same loads, so _count
// always equals the +Inf bucket.
class Histogram {
 public:
  explicit Histogram(const std::vector<double>* bounds);
  // NaN is ignored (it would poison _sum for the life of the process).
  void observe(double value);
  template <typename Rep, typename Period>
  void observe(std::chrono::duration<Rep, Period> d) {
    observe(std::chrono::duration<double>(d).count());
  }

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return *bounds_; }

 private:
  const std::vector<double>* bounds_;  // owned by the family, which outlives its series
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
};

class Registry;

// What families share: name, help, type, label names, and the rendering entry point.
class FamilyBase {
 public:
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;
  virtual ~FamilyBase() = default;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& labelNames() const { return label_names_; }
  size_t maxSeries() const { return max_series_; }
  virtual size_t seriesCount() const = 0;

 protected:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names, size_t max_series, Counter* overflow);
  friend class Registry;
  virtual void render(std::string& out, Format format) const = 0;
  void renderHeader(std::string& out, Format format) const;

  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
  size_t max_series_;
  Counter* overflow_;  // pgwarden_metrics_series_overflow_total{family=name_}; null for itself
};

// A family of series of one metric type sharing label names. with() is the cold path (mutex, map
// lookup, allocation the first time a label set is seen); the reference it returns is stable for
// the life of the registry, so callers cache it and the hot path is one atomic operation.
template <typename T>
class Family final : public FamilyBase {
 public:
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         size_t max_series, Counter* overflow, std::vector<double> bounds = {});

  // Label values in the order of labelNames(). A wrong number of values is a programming error:
  // it is logged and the update lands in the "other" series rather than crashing the daemon.
  // Invalid UTF-8 is replaced so the exposition always parses.
  T& with(std::initializer_list<std::string_view> values) {
    return with(std::span<const std::string_view>(values.begin(), values.size()));
  }
  T& with(std::span<const std::string_view> values);
  T& with(const std::vector<std::string>& values);
  size_t seriesCount() const override;

 private:
  struct Series {
    std::string labels;  // rendered and escaped: name="value",name="value"
    std::unique_ptr<T> metric;
  };
  void render(std::string& out, Format format) const override;
  T& lookupOrCreate(std::span<const std::string_view> values);
  Series& createLocked(std::string key, std::span<const std::string> values);

  std::vector<double> bounds_;   // histograms only
  std::vector<std::string> le_;  // histograms only: rendered bounds, then "+Inf"
  mutable std::mutex mu_;
  std::map<std::string, Series, std::less<>> series_;  // key: values joined by '\xff'
  size_t regular_series_ = 0;  // series created under the cap (the overflow one is extra)
  bool overflow_logged_ = false;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;
extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// Where a callback family's collector puts its samples at scrape time. Samples with the same
// label values are summed; label sets beyond the family's cap are dropped and counted.
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  void add(std::initializer_list<std::string_view> label_values, double value) {
    add(std::span<const std::string_view>(label_values.begin(), label_values.size()), value);
  }
  virtual void add(std::span<const std::string_view> label_values, double value) = 0;
};

// A counter or gauge whose value is computed when scraped (connections by state, queue depth,
// process figures). The collector runs on the thread that renders (the event loop, for the HTTP
// endpoint), so it may read loop-owned state without locks; it must not block or touch the
// registry.
class CallbackFamily final : public FamilyBase {
 public:
  using Collector = std::function<void(SampleSink&)>;
  CallbackFamily(std::string name, std::string help, MetricType type,
                 std::vector<std::string> label_names, size_t max_series, Counter* overflow);
  // Replaces the collector; without one the family renders its HELP/TYPE lines only.
  void setCollector(Collector collector);
  size_t seriesCount() const override;

 private:
  void render(std::string& out, Format format) const override;
  mutable std::mutex mu_;
  Collector collector_;
};

// Owns every family. Registration happens at start-up and throws std::invalid_argument on a bad
// or duplicate name (a programming error, never a data-path event).
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Counter names end in _total (the OpenMetrics family name is the name without it).
  CounterFamily& counterFamily(std::string name, std::string help,
                               std::vector<std::string> label_names,
                               size_t max_series = kDefaultMaxSeries);
  GaugeFamily& gaugeFamily(std::string name, std::string help, std::vector<std::string> label_names,
                           size_t max_series = kDefaultMaxSeries);
  HistogramFamily& histogramFamily(std::string name, std::string help,
                                   std::vector<std::string> label_names, std::vector<double> bounds,
                                   size_t max_series = kDefaultMaxHistogramSeries);
  CallbackFamily& callbackFamily(std::string name, std::string help, MetricType type,
                                 std::vector<std::string> label_names,
                                 CallbackFamily::Collector collector = {},
                                 size_t max_series = kDefaultMaxSeries);
  // Unlabeled conveniences: the family and its single series in one call.
  Counter& counter(std::string name, std::string help);
  Gauge& gauge(std::string name, std::string help);
  Histogram& histogram(std::string name, std::string help, std::vector<double> bounds);

  // Renders every family in registration order. Cost grows with the number of series; it
  // allocates only for `out` and for callback families.
  void render(std::string& out, Format format) const;
  std::string render(Format format) const;

  CounterFamily& overflowFamily() { return *overflow_; }

 private:
  void checkName(const std::string& name, MetricType type,
                 const std::vector<std::string>& label_names);
  template <typename F>
  F& add(std::unique_ptr<F> family);
  Counter* overflowCounterFor(const std::string& name);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_;
  std::vector<std::string> base_names_;  // OpenMetrics family names, to catch collisions
  CounterFamily* overflow_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// The catalogue: every pgwarden_* family, created once. docs/metrics.md describes each one.
// Labels only ever carry bounded values (group, guard, code, outcome, intent, kind, state, ...):
// never conversation_id, agent_id, SQL or other client-chosen text.

struct BuildInfo {
  std::string version;
  std::string git_sha;
};

// Mirrors history::Outcome (same order); the session maps one to the other with a switch.
enum class StatementOutcome : uint8_t {
  kOk, kError, kDenied, kCancelled, kClientGone, kBudget, kAborted
};
inline constexpr size_t kStatementOutcomeCount = 7;
const char* outcomeLabel(StatementOutcome outcome);
// Mirrors guards::Intent (the inferred intent; the client-sent one is free text and never a label).
enum class StatementIntent : uint8_t {
  kCatalog,
  kLookup,
  kAggregation,
  kWrite,
  kDdl,
  kAdmin,
  kOther
};
inline constexpr size_t kStatementIntentCount = 7;
const char* intentLabel(StatementIntent intent);

// What the history recorder reports (history::RecorderStats, without depending on it).
struct HistorySnapshot {
  uint64_t written = 0;
  uint64_t dropped = 0;
  uint64_t write_errors = 0;
  uint64_t queue_depth = 0;
  uint64_t store_up = 1;  // 1 while the store takes writes, 0 while it is down
};

struct Metrics {
  explicit Metrics(const BuildInfo& build);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  Registry registry;  // declared first: every reference below points into it

  // connections
  CallbackFamily& client_connections;          // gauge {state}
  CallbackFamily& server_connections;          // gauge {pool,state}
  Counter& client_connections_accepted;        // pgwarden_client_connections_accepted_total
  CounterFamily& client_connections_rejected;  // {reason}
  // statements
  CounterFamily& statements;            // {group,outcome,intent}
  HistogramFamily& statement_duration;  // seconds {group,outcome}
  HistogramFamily& guard_duration;      // seconds {guard}
  CounterFamily& rows_returned;         // {group}
  CounterFamily& statements_truncated;  // {group}
  // guards and budgets
  CounterFamily& guard_decisions;   // {group,guard,action,code}
  CounterFamily& budget_exhausted;  // {group}
  Gauge& conversations_live;
  // upstream
  CounterFamily& upstream_connect_errors;  // {reason}
  CounterFamily& upstream_server_errors;  // {sqlstate_class}
  Counter& upstream_cancel_requests;
  // history (collected from the recorder at scrape time, see setHistorySource)
  CallbackFamily& history_records_written;  // counter {store}
  CallbackFamily& history_records_dropped;  // counter {store}
  CallbackFamily& history_write_errors;     // counter {store}
  CallbackFamily& history_queue_depth;      // gauge {store}
  CallbackFamily& history_store_up;         // gauge {store}
  // webhook and Lua guards
  CounterFamily& external_guard_calls;       // {kind}
  CounterFamily& external_guard_failures;    // {kind}
  CounterFamily& external_guard_timeouts;    // {kind}
  HistogramFamily& external_guard_duration;  // seconds {kind}
  // the HTTP endpoint itself
  CounterFamily& http_requests;              // {handler,code}
  CounterFamily& http_scrapes;               // {format}
  CounterFamily& http_connections_rejected;  // {reason}
  // process figures and build info are registered by registerProcessMetrics().

  // Reads the recorder's counters at scrape time. `source` runs on the scraping thread and must
  // be cheap and thread-safe (Recorder::stats() is).
  void setHistorySource(std::string store, std::function<HistorySnapshot()> source);
};

// The series one policy group's sessions update per statement, resolved lazily (first use of an
// outcome/intent takes the family's lock once) and cached, so the per-statement cost is an atomic
// load and an atomic add. Build one per group when the config loads and share it.
class GroupSeries {
 public:
  GroupSeries(Metrics& metrics, std::string group);
  Counter& statements(StatementOutcome outcome, StatementIntent intent);
  Histogram& duration(StatementOutcome outcome);
  Counter& rowsReturned() { return rows_returned_; }
  Counter& truncated() { return truncated_; }
  Counter& budgetExhausted() { return budget_exhausted_; }
  const std::string& group() const { return group_; }

 private:
  Metrics& metrics_;
  std::string group_;
  std::atomic<Counter*> statements_[kStatementOutcomeCount * kStatementIntentCount] = {};
  std::atomic<Histogram*> durations_[kStatementOutcomeCount] = {};
  Counter& rows_returned_;
  Counter& truncated_;
  Counter& budget_exhausted_;
};

// Escaping as both formats define it; exposed for tests.
void appendEscapedLabelValue(std::string& out, std::string_view value);
void appendEscapedHelp(std::string& out, std::string_view help, Format format);
void appendDouble(std::string& out, double value);
// Replaces bytes that are not valid UTF-8 with '?'.
std::string sanitizeUtf8(std::string_view value);

}  // namespace pgwarden::daemon::metrics
