// pgwarden's metrics registry: counters, gauges and histograms from prometheus-cpp's core, behind a
// thin wrapper that adds what the daemon needs on top of it: a cap on the label sets of every
// family (further ones share one `other` series, counted), label values cleaned to valid UTF-8,
// families whose values are computed at scrape time, and one exposition in registration order
// rendered by prometheus::TextSerializer (text format 0.0.4).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cmath>
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

namespace pgwarden::metrics {

// The Content-Type of a rendered exposition.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

// Every family holds at most this many label sets unless told otherwise; further label sets
// share one series whose label values are all kOtherLabelValue, and each such update is counted
// in pgwarden_metrics_series_overflow_total{family}.
inline constexpr size_t kDefaultMaxSeries = 1000;
inline constexpr size_t kDefaultMaxHistogramSeries = 200;
inline constexpr std::string_view kOtherLabelValue = "other";

// The handles below are what a caller keeps: each points at one prometheus-cpp series owned by
// its family, valid for the life of the registry. Updates go straight to prometheus-cpp.

// A monotonically increasing count.
class Counter {
 public:
  using Native = prometheus::Counter;
  explicit Counter(Native& native) : native_(&native) {}
  void inc(uint64_t n = 1) { native_->Increment(static_cast<double>(n)); }
  uint64_t value() const { return static_cast<uint64_t>(native_->Value()); }

 private:
  Native* native_;
};

// A value that goes up and down (queue depth, live conversations).
class Gauge {
 public:
  using Native = prometheus::Gauge;
  explicit Gauge(Native& native) : native_(&native) {}
  void set(int64_t v) { native_->Set(static_cast<double>(v)); }
  void inc(int64_t n = 1) { native_->Increment(static_cast<double>(n)); }
  void dec(int64_t n = 1) { native_->Decrement(static_cast<double>(n)); }
  int64_t value() const { return static_cast<int64_t>(native_->Value()); }

 private:
  Native* native_;
};

// Fixed-bucket histogram (prometheus-cpp's: a value equal to a bound counts in that bound's
// bucket; _count always equals the +Inf bucket).
class Histogram {
 public:
  using Native = prometheus::Histogram;
  explicit Histogram(Native& native) : native_(&native) {}
  // NaN is ignored (it would poison _sum for the life of the process).
  void observe(double value) {
    if (!std::isnan(value)) native_->Observe(value);
  }
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

 private:
  Native* native_;
};

class Registry;

// What families share: name, help, type, label names, cap, and the collection entry point.
class FamilyBase {
 public:
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;
  virtual ~FamilyBase() = default;

  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& labelNames() const { return label_names_; }
  size_t maxSeries() const { return max_series_; }
  virtual size_t seriesCount() const = 0;

 protected:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names, size_t max_series, Counter* overflow);
  friend class Registry;
  // Appends this family's samples, ordered by label values; a family without series still
  // appends itself (no samples) so that the exposition declares it with HELP and TYPE.
  virtual void collect(std::vector<prometheus::MetricFamily>& out) const = 0;
  prometheus::MetricFamily emptyFamily() const;

  std::string name_;
  std::string help_;  // escaped for the text format (the serializer writes it as it is)
  MetricType type_;
  std::vector<std::string> label_names_;
  size_t max_series_;
  Counter* overflow_;  // pgwarden_metrics_series_overflow_total{family=name_}; null for itself
};

// A family of series of one metric type sharing label names, over one prometheus::Family. with()
// is the cold path (mutex, map lookup, allocation the first time a label set is seen); the
// reference it returns is stable for the life of the registry, so callers cache it and the hot
// path is one prometheus-cpp update.
template <typename T>
class Family final : public FamilyBase {
 public:
  using NativeFamily = prometheus::Family<typename T::Native>;
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         size_t max_series, Counter* overflow, NativeFamily& native,
         std::vector<double> bounds = {});

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
  void collect(std::vector<prometheus::MetricFamily>& out) const override;
  T& lookupOrCreate(std::span<const std::string_view> values);
  T& createLocked(std::string key, std::span<const std::string> values);

  NativeFamily& native_;        // owned by the registry's prometheus::Registry
  std::vector<double> bounds_;  // histograms only
  mutable std::mutex mu_;
  std::map<std::string, T, std::less<>> series_;  // key: values joined by '\xff'
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
// process figures): prometheus-cpp's collectable idiom, producing its MetricFamily directly. The
// collector runs on the thread that renders (the event loop, for the HTTP endpoint), so it may
// read loop-owned state without locks; it must not block or touch the registry.
class CallbackFamily final : public FamilyBase {
 public:
  using Collector = std::function<void(SampleSink&)>;
  CallbackFamily(std::string name, std::string help, MetricType type,
                 std::vector<std::string> label_names, size_t max_series, Counter* overflow);
  // Replaces the collector; without one the family renders its HELP/TYPE lines only.
  void setCollector(Collector collector);
  size_t seriesCount() const override;

 private:
  void collect(std::vector<prometheus::MetricFamily>& out) const override;
  mutable std::mutex mu_;
  Collector collector_;
};

// Owns every family (the series themselves live in a prometheus::Registry). Registration happens
// at start-up and throws std::invalid_argument on a bad or duplicate name (a programming error,
// never a data-path event).
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Counter names end in _total.
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

  // Every family's samples in registration order (callback families' collectors run here).
  std::vector<prometheus::MetricFamily> collect() const;
  // collect() in the Prometheus text format 0.0.4 (prometheus::TextSerializer), appended to out.
  void render(std::string& out) const;
  std::string render() const;

  CounterFamily& overflowFamily() { return *overflow_; }

 private:
  void checkName(const std::string& name, MetricType type,
                 const std::vector<std::string>& label_names);
  template <typename F>
  F& add(std::unique_ptr<F> family);
  Counter* overflowCounterFor(const std::string& name);

  // Declared before the families: they point into it.
  std::unique_ptr<prometheus::Registry> native_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_;
  std::vector<std::string> base_names_;  // every sample name a family occupies, to catch collisions
  CounterFamily* overflow_ = nullptr;
};

// Replaces bytes that are not valid UTF-8 with '?'.
std::string sanitizeUtf8(std::string_view value);

}  // namespace pgwarden::metrics
