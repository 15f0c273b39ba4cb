// The registry over prometheus-cpp: series caps and label cleaning in front of prometheus::Family,
// scrape-time families as MetricFamily producers, and the exposition through TextSerializer.
// Text format 0.0.4: https://prometheus.io/docs/instrumenting/exposition_formats/
#include "metrics/registry.h"

#include <prometheus/check_names.h>
#include <prometheus/client_metric.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <stdexcept>

namespace pgwarden::metrics {

namespace {

constexpr char kKeySeparator = '\xff';  // never part of valid UTF-8, so keys cannot collide
constexpr size_t kMaxLabels = 16;

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// TextSerializer writes HELP as it is given; the text format wants \ and newline escaped there.
std::string escapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

prometheus::MetricType nativeType(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return prometheus::MetricType::Counter;
    case MetricType::kGauge:
      return prometheus::MetricType::Gauge;
    case MetricType::kHistogram:
      return prometheus::MetricType::Histogram;
  }
  return prometheus::MetricType::Untyped;
}

// prometheus::Family keeps its series in a hash map; a stable order keeps scrapes diffable.
void sortByLabels(prometheus::MetricFamily& family) {
  std::sort(family.metric.begin(), family.metric.end(),
            [](const prometheus::ClientMetric& a, const prometheus::ClientMetric& b) {
              return a.label < b.label;
            });
}

// Label names with their cleaned values, in prometheus-cpp's order (by name).
prometheus::Labels makeLabels(const std::vector<std::string>& names,
                              std::span<const std::string> values) {
  prometheus::Labels labels;
  for (size_t i = 0; i < names.size(); ++i) labels.emplace(names[i], values[i]);
  return labels;
}

Counter makeSeries(prometheus::Family<prometheus::Counter>& family,
                   const prometheus::Labels& labels, const std::vector<double>&) {
  return Counter(family.Add(labels));
}
Gauge makeSeries(prometheus::Family<prometheus::Gauge>& family, const prometheus::Labels& labels,
                 const std::vector<double>&) {
  return Gauge(family.Add(labels));
}
Histogram makeSeries(prometheus::Family<prometheus::Histogram>& family,
                     const prometheus::Labels& labels, const std::vector<double>& bounds) {
  return Histogram(family.Add(labels, bounds));
}

}  // namespace

std::string sanitizeUtf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    auto b = static_cast<unsigned char>(in[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (b >= 0x01 && b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2;
      cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3;
      cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4;
      cp = b & 0x07;
    }
    bool ok = len > 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k) {
      auto c = static_cast<unsigned char>(in[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (ok) {
      static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out.push_back('?');  // also NUL, which some consumers of the exposition choke on
      ++i;
    }
  }
  return out;
}

Histogram::Snapshot Histogram::snapshot() const {
  const prometheus::ClientMetric m = native_->Collect();
  Snapshot s;
  for (const auto& b : m.histogram.bucket) s.cumulative.push_back(b.cumulative_count);
  s.count = m.histogram.sample_count;
  s.sum = m.histogram.sample_sum;
  return s;
}

// ----- families -------------------------------------------------------------------------------

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names, size_t max_series, Counter* overflow)
    : name_(std::move(name)),
      help_(escapeHelp(help)),
      type_(type),
      label_names_(std::move(label_names)),
      max_series_(max_series),
      overflow_(overflow) {}

prometheus::MetricFamily FamilyBase::emptyFamily() const {
  prometheus::MetricFamily family;
  family.name = name_;
  family.help = help_;
  family.type = nativeType(type_);
  return family;
}

template <typename T>
Family<T>::Family(std::string name, std::string help, MetricType type,
                  std::vector<std::string> label_names, size_t max_series, Counter* overflow,
                  NativeFamily& native, std::vector<double> bounds)
    : FamilyBase(std::move(name), std::move(help), type, std::move(label_names), max_series,
                 overflow),
      native_(native),
      bounds_(std::move(bounds)) {}

template <typename T>
T& Family<T>::with(std::span<const std::string_view> values) {
  return lookupOrCreate(values);
}

template <typename T>
T& Family<T>::with(const std::vector<std::string>& values) {
  std::array<std::string_view, kMaxLabels> views;
  size_t n = std::min(values.size(), kMaxLabels);
  for (size_t i = 0; i < n; ++i) views[i] = values[i];
  // More than kMaxLabels values cannot match any family; pass the true count so it is reported.
  if (values.size() > kMaxLabels) {
    std::vector<std::string_view> all(values.begin(), values.end());
    return lookupOrCreate(all);
  }
  return lookupOrCreate(std::span<const std::string_view>(views.data(), n));
}

template <typename T>
size_t Family<T>::seriesCount() const {
  std::lock_guard lock(mu_);
  return series_.size();
}

template <typename T>
T& Family<T>::lookupOrCreate(std::span<const std::string_view> values) {
  // A reused per-thread buffer: looking up an existing series allocates nothing.
  thread_local std::string key;
  key.clear();
  bool arity_ok = values.size() == label_names_.size();
  if (arity_ok) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) key.push_back(kKeySeparator);
      key.append(values[i]);
    }
  }
  std::lock_guard lock(mu_);
  if (arity_ok) {
    if (auto it = series_.find(key); it != series_.end()) return it->second;
    std::vector<std::string> clean;
    clean.reserve(values.size());
    std::string clean_key;
    for (size_t i = 0; i < values.size(); ++i) {
      clean.push_back(sanitizeUtf8(values[i]));
      if (i > 0) clean_key.push_back(kKeySeparator);
      clean_key.append(clean.back());
    }
    if (auto it = series_.find(clean_key); it != series_.end()) return it->second;
    if (regular_series_ < max_series_) {
      ++regular_series_;
      return createLocked(std::move(clean_key), clean);
    }
    if (!overflow_logged_) {
      overflow_logged_ = true;
      spdlog::warn("metric {}: more than {} label sets; further ones are counted as \"{}\"", name_,
                   max_series_, kOtherLabelValue);
    }
  } else {
    spdlog::error("metric {}: {} label values given for {} labels; counted as \"{}\"", name_,
                  values.size(), label_names_.size(), kOtherLabelValue);
  }
  if (overflow_ != nullptr) overflow_->inc();
  std::vector<std::string> other(label_names_.size(), std::string(kOtherLabelValue));
  std::string other_key;
  for (size_t i = 0; i < other.size(); ++i) {
    if (i > 0) other_key.push_back(kKeySeparator);
    other_key.append(other[i]);
  }
  // The "other" series shares the map (not a separate slot) so a genuine label set of all
  // "other" values can never render twice.
  if (auto it = series_.find(other_key); it != series_.end()) return it->second;
  return createLocked(std::move(other_key), other);
}

template <typename T>
T& Family<T>::createLocked(std::string key, std::span<const std::string> values) {
  T series = makeSeries(native_, makeLabels(label_names_, values), bounds_);
  return series_.emplace(std::move(key), series).first->second;
}

template <typename T>
void Family<T>::collect(std::vector<prometheus::MetricFamily>& out) const {
  std::vector<prometheus::MetricFamily> native = native_.Collect();
  if (native.empty()) {
    out.push_back(emptyFamily());
    return;
  }
  for (auto& family : native) {
    sortByLabels(family);
    out.push_back(std::move(family));
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ----- callback families ----------------------------------------------------------------------

namespace {

class CollectingSink final : public SampleSink {
 public:
  CollectingSink(const FamilyBase& family, Counter* overflow)
      : family_(family), overflow_(overflow) {}

  void add(std::span<const std::string_view> values, double value) override {
    const auto& names = family_.labelNames();
    if (values.size() != names.size()) {
      if (!arity_logged_) {
        arity_logged_ = true;
        spdlog::error("metric {}: collector gave {} label values for {} labels", family_.name(),
                      values.size(), names.size());
      }
      if (overflow_ != nullptr) overflow_->inc();
      return;
    }
    std::vector<std::string> clean;
    clean.reserve(values.size());
    std::string key;
    for (size_t i = 0; i < values.size(); ++i) {
      clean.push_back(sanitizeUtf8(values[i]));
      if (i > 0) key.push_back(kKeySeparator);
      key.append(clean.back());
    }
    auto it = samples_.find(key);
    if (it != samples_.end()) {
      it->second.value += value;
      return;
    }
    if (samples_.size() >= family_.maxSeries()) {
      if (overflow_ != nullptr) overflow_->inc();
      return;
    }
    samples_.emplace(std::move(key), Sample{makeLabels(names, clean), value});
  }

  // The summed samples as one MetricFamily's metrics, in prometheus-cpp's label order.
  void moveInto(prometheus::MetricFamily& family) {
    family.metric.reserve(samples_.size());
    for (auto& [key, s] : samples_) {
      prometheus::ClientMetric m;
      for (auto& [name, value] : s.labels) m.label.push_back({name, value});
      if (family_.type() == MetricType::kCounter) {
        m.counter.value = s.value;
      } else {
        m.gauge.value = s.value;
      }
      family.metric.push_back(std::move(m));
    }
    sortByLabels(family);
  }
  size_t size() const { return samples_.size(); }

 private:
  struct Sample {
    prometheus::Labels labels;
    double value;
  };
  const FamilyBase& family_;
  Counter* overflow_;
  std::map<std::string, Sample> samples_;
  bool arity_logged_ = false;
};

}  // namespace

CallbackFamily::CallbackFamily(std::string name, std::string help, MetricType type,
                               std::vector<std::string> label_names, size_t max_series,
                               Counter* overflow)
    : FamilyBase(std::move(name), std::move(help), type, std::move(label_names), max_series,
                 overflow) {}

void CallbackFamily::setCollector(Collector collector) {
  std::lock_guard lock(mu_);
  collector_ = std::move(collector);
}

size_t CallbackFamily::seriesCount() const {
  std::lock_guard lock(mu_);
  if (!collector_) return 0;
  CollectingSink sink(*this, nullptr);
  collector_(sink);
  return sink.size();
}

void CallbackFamily::collect(std::vector<prometheus::MetricFamily>& out) const {
  prometheus::MetricFamily family = emptyFamily();
  std::lock_guard lock(mu_);
  if (collector_) {
    CollectingSink sink(*this, overflow_);
    collector_(sink);
    sink.moveInto(family);
  }
  out.push_back(std::move(family));
}

// ----- Registry -------------------------------------------------------------------------------

Registry::Registry()
    : native_(std::make_unique<prometheus::Registry>(prometheus::Registry::InsertBehavior::Throw)) {
  // Registered first and uncapped: its series count is bounded by the number of families.
  std::string name = "pgwarden_metrics_series_overflow_total";
  std::string help =
      "Label-set lookups that exceeded their family's series cap and were counted under "
      "label values \"other\".";
  std::vector<std::string> labels{"family"};
  checkName(name, MetricType::kCounter, labels);
  auto& native = prometheus::BuildCounter().Name(name).Help(escapeHelp(help)).Register(*native_);
  overflow_ = &add(std::make_unique<CounterFamily>(std::move(name), std::move(help),
                                                   MetricType::kCounter, std::move(labels),
                                                   SIZE_MAX, nullptr, native));
}

Registry::~Registry() = default;

void Registry::checkName(const std::string& name, MetricType type,
                         const std::vector<std::string>& label_names) {
  if (!prometheus::CheckMetricName(name)) throw std::invalid_argument("invalid metric name: " + name);
  bool total = endsWith(name, "_total");
  if (type == MetricType::kCounter && (!total || name.size() == 6)) {
    throw std::invalid_argument("counter name must end in _total: " + name);
  }
  if (type != MetricType::kCounter && total) {
    throw std::invalid_argument("only counter names end in _total: " + name);
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& l = label_names[i];
    if (!prometheus::CheckLabelName(l)) {
      throw std::invalid_argument(name + ": invalid label name " + l);
    }
    if (type == MetricType::kHistogram && l == "le") {
      throw std::invalid_argument(name + ": label le is reserved for histogram buckets");
    }
    if (std::find(label_names.begin(), label_names.begin() + static_cast<ptrdiff_t>(i), l) !=
        label_names.begin() + static_cast<ptrdiff_t>(i)) {
      throw std::invalid_argument(name + ": duplicate label name " + l);
    }
  }
  if (label_names.size() > kMaxLabels) throw std::invalid_argument(name + ": too many labels");
  // Every name a family can occupy must be free, a counter's name without _total included (the
  // family name OpenMetrics gives it).
  std::vector<std::string> taken;
  switch (type) {
    case MetricType::kCounter:
      taken = {name.substr(0, name.size() - 6), name};
      break;
    case MetricType::kGauge:
      taken = {name};
      break;
    case MetricType::kHistogram:
      taken = {name, name + "_bucket", name + "_sum", name + "_count"};
      break;
  }
  for (const auto& t : taken) {
    if (std::find(base_names_.begin(), base_names_.end(), t) != base_names_.end()) {
      throw std::invalid_argument("metric name collides with an existing one: " + name);
    }
  }
  base_names_.insert(base_names_.end(), taken.begin(), taken.end());
}

Counter* Registry::overflowCounterFor(const std::string& name) { return &overflow_->with({name}); }

template <typename F>
F& Registry::add(std::unique_ptr<F> family) {
  F& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

CounterFamily& Registry::counterFamily(std::string name, std::string help,
                                       std::vector<std::string> label_names, size_t max_series) {
  std::lock_guard lock(mu_);
  checkName(name, MetricType::kCounter, label_names);
  auto& native = prometheus::BuildCounter().Name(name).Help(escapeHelp(help)).Register(*native_);
  Counter* overflow = overflowCounterFor(name);
  return add(std::make_unique<CounterFamily>(std::move(name), std::move(help), MetricType::kCounter,
                                             std::move(label_names), max_series, overflow, native));
}

GaugeFamily& Registry::gaugeFamily(std::string name, std::string help,
                                   std::vector<std::string> label_names, size_t max_series) {
  std::lock_guard lock(mu_);
  checkName(name, MetricType::kGauge, label_names);
  auto& native = prometheus::BuildGauge().Name(name).Help(escapeHelp(help)).Register(*native_);
  Counter* overflow = overflowCounterFor(name);
  return add(std::make_unique<GaugeFamily>(std::move(name), std::move(help), MetricType::kGauge,
                                           std::move(label_names), max_series, overflow, native));
}

HistogramFamily& Registry::histogramFamily(std::string name, std::string help,
                                           std::vector<std::string> label_names,
                                           std::vector<double> bounds, size_t max_series) {
  std::lock_guard lock(mu_);
  if (bounds.empty()) throw std::invalid_argument(name + ": histogram needs bucket bounds");
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
      throw std::invalid_argument(name + ": bucket bounds must be finite and increasing");
    }
  }
  checkName(name, MetricType::kHistogram, label_names);
  auto& native =
      prometheus::BuildHistogram().Name(name).Help(escapeHelp(help)).Register(*native_);
  Counter* overflow = overflowCounterFor(name);
  return add(std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                               MetricType::kHistogram, std::move(label_names),
                                               max_series, overflow, native, std::move(bounds)));
}

CallbackFamily& Registry::callbackFamily(std::string name, std::string help, MetricType type,
                                         std::vector<std::string> label_names,
                                         CallbackFamily::Collector collector, size_t max_series) {
  if (type == MetricType::kHistogram) {
    throw std::invalid_argument(name + ": callback families are counters or gauges");
  }
  std::lock_guard lock(mu_);
  checkName(name, type, label_names);
  Counter* overflow = overflowCounterFor(name);
  auto& family = add(std::make_unique<CallbackFamily>(
      std::move(name), std::move(help), type, std::move(label_names), max_series, overflow));
  if (collector) family.setCollector(std::move(collector));
  return family;
}

Counter& Registry::counter(std::string name, std::string help) {
  return counterFamily(std::move(name), std::move(help), {}).with({});
}

Gauge& Registry::gauge(std::string name, std::string help) {
  return gaugeFamily(std::move(name), std::move(help), {}).with({});
}

Histogram& Registry::histogram(std::string name, std::string help, std::vector<double> bounds) {
  return histogramFamily(std::move(name), std::move(help), {}, std::move(bounds)).with({});
}

std::vector<prometheus::MetricFamily> Registry::collect() const {
  std::vector<prometheus::MetricFamily> out;
  std::lock_guard lock(mu_);
  out.reserve(families_.size());
  for (const auto& family : families_) family->collect(out);
  return out;
}

void Registry::render(std::string& out) const {
  const std::vector<prometheus::MetricFamily> families = collect();
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, families);
  out.append(text.view());
}

std::string Registry::render() const {
  std::string out;
  render(out);
  return out;
}

}  // namespace pgwarden::metrics
