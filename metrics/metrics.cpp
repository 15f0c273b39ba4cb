// The metrics registry and its two exposition formats, and the catalogue of pgwarden_* families.
// Text format 0.0.4: https://prometheus.io/docs/instrumenting/exposition_formats/
// OpenMetrics 1.0.0:
// https://github.com/OpenObservability/OpenMetrics/blob/main/specification/OpenMetrics.md
#include "metrics/metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "metrics/process_metrics.h"

namespace pgwarden::daemon::metrics {

const std::vector<double> kStatementDurationBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
const std::vector<double> kGuardDurationBuckets = {
    0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
    0.001,    0.0025,    0.005,    0.01,    0.05,     0.1,     0.5,    1,       5};
const std::vector<double> kExternalCallBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                  0.25,  0.5,    1,     2.5,  5,     10};

namespace {

constexpr char kKeySeparator = '\xff';  // never part of valid UTF-8, so keys cannot collide
constexpr size_t kMaxLabels = 16;

bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isNameChar(char c) { return isNameStart(c) || (c >= '0' && c <= '9'); }

bool validMetricName(const std::string& name) {
  if (name.empty() || !(isNameStart(name[0]) || name[0] == ':')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return isNameChar(c) || c == ':'; });
}

bool validLabelName(const std::string& name) {
  if (name.empty() || !isNameStart(name[0])) return false;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return false;  // reserved
  return std::all_of(name.begin(), name.end(), isNameChar);
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The name on HELP/TYPE lines: OpenMetrics names a counter family without its _total suffix.
std::string_view familyName(const std::string& name, MetricType type, Format format) {
  if (format == Format::kOpenMetrics && type == MetricType::kCounter && endsWith(name, "_total")) {
    return std::string_view(name).substr(0, name.size() - 6);
  }
  return name;
}

void appendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

void appendInt(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// Bucket bounds print the same in both formats so a series keeps its identity whichever format a
// scraper negotiates; integral bounds get ".0" (OpenMetrics' canonical form: le="1.0").
std::string leValue(double bound) {
  std::string s;
  appendDouble(s, bound);
  if (std::isfinite(bound) && s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

void appendSampleName(std::string& out, std::string_view name, std::string_view suffix,
                      std::string_view labels) {
  out.append(name);
  out.append(suffix);
  if (!labels.empty()) {
    out.push_back('{');
    out.append(labels);
    out.push_back('}');
  }
  out.push_back(' ');
}

std::string renderLabels(const std::vector<std::string>& names,
                         std::span<const std::string> values) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(names[i]);
    out.append("=\"");
    appendEscapedLabelValue(out, values[i]);
    out.push_back('"');
  }
  return out;
}

template <typename T>
std::unique_ptr<T> makeMetric(const std::vector<double>* bounds);
template <>
std::unique_ptr<Counter> makeMetric<Counter>(const std::vector<double>*) {
  return std::make_unique<Counter>();
}
template <>
std::unique_ptr<Gauge> makeMetric<Gauge>(const std::vector<double>*) {
  return std::make_unique<Gauge>();
}
template <>
std::unique_ptr<Histogram> makeMetric<Histogram>(const std::vector<double>* bounds) {
  return std::make_unique<Histogram>(bounds);
}

}  // namespace

// ----- formatting helpers ---------------------------------------------------------------------

const char* contentType(Format format) {
  switch (format) {
    case Format::kPrometheusText:
      return "text/plain; version=0.0.4; charset=utf-8";
    case Format::kOpenMetrics:
      return "application/openmetrics-text; version=1.0.0; charset=utf-8";
  }
  return "text/plain";
}

Format negotiateFormat(std::string_view accept) {
  // Media ranges are comma-separated, each with ;-separated parameters (q=weight).
  size_t pos = 0;
  while (pos <= accept.size()) {
    size_t end = accept.find(',', pos);
    if (end == std::string_view::npos) end = accept.size();
    std::string_view range = accept.substr(pos, end - pos);
    pos = end + 1;
    size_t semi = range.find(';');
    std::string_view type = range.substr(0, semi);
    while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
    while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
    if (type != "application/openmetrics-text") continue;
    bool zero_q = false;
    while (semi != std::string_view::npos) {
      size_t next = range.find(';', semi + 1);
      std::string_view param = range.substr(
          semi + 1, next == std::string_view::npos ? std::string_view::npos : next - semi - 1);
      while (!param.empty() && param.front() == ' ') param.remove_prefix(1);
      if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
        std::string_view q = param.substr(2);
        zero_q = !q.empty() && std::all_of(q.begin(), q.end(),
                                           [](char c) { return c == '0' || c == '.' || c == ' '; });
      }
      semi = next;
    }
    if (!zero_q) return Format::kOpenMetrics;
  }
  return Format::kPrometheusText;
}

const char* typeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void appendEscapedLabelValue(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out.append("\\\\");
        break;
      case '"':
        out.append("\\\"");
        break;
      case '\n':
        out.append("\\n");
        break;
      default:
        out.push_back(c);
    }
  }
}

void appendEscapedHelp(std::string& out, std::string_view help, Format format) {
  for (char c : help) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '"' && format == Format::kOpenMetrics) {
      out.append("\\\"");  // OpenMetrics escapes HELP like a label value; 0.0.4 does not
    } else {
      out.push_back(c);
    }
  }
}

void appendDouble(std::string& out, double v) {
  if (std::isnan(v)) {
    out.append("NaN");
  } else if (std::isinf(v)) {
    out.append(v > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip form
    out.append(buf, r.ptr);
  }
}

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

// ----- Histogram ------------------------------------------------------------------------------

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds->size() + 1)) {
  for (size_t i = 0; i <= bounds->size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double value) {
  if (std::isnan(value)) return;
  // le semantics: a value equal to a bound belongs to that bound's bucket.
  size_t i = static_cast<size_t>(std::lower_bound(bounds_->begin(), bounds_->end(), value) -
                                 bounds_->begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.resize(bounds_->size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

// ----- families -------------------------------------------------------------------------------

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names, size_t max_series, Counter* overflow)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)),
      max_series_(max_series),
      overflow_(overflow) {}

void FamilyBase::renderHeader(std::string& out, Format format) const {
  std::string_view family = familyName(name_, type_, format);
  out.append("# HELP ");
  out.append(family);
  out.push_back(' ');
  appendEscapedHelp(out, help_, format);
  out.append("\n# TYPE ");
  out.append(family);
  out.push_back(' ');
  out.append(typeName(type_));
  out.push_back('\n');
}

template <typename T>
Family<T>::Family(std::string name, std::string help, MetricType type,
                  std::vector<std::string> label_names, size_t max_series, Counter* overflow,
                  std::vector<double> bounds)
    : FamilyBase(std::move(name), std::move(help), type, std::move(label_names), max_series,
                 overflow),
      bounds_(std::move(bounds)) {
  for (double b : bounds_) le_.push_back(leValue(b));
  le_.push_back("+Inf");
}

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
    if (auto it = series_.find(key); it != series_.end()) return *it->second.metric;
    std::vector<std::string> clean;
    clean.reserve(values.size());
    std::string clean_key;
    for (size_t i = 0; i < values.size(); ++i) {
      clean.push_back(sanitizeUtf8(values[i]));
      if (i > 0) clean_key.push_back(kKeySeparator);
      clean_key.append(clean.back());
    }
    if (auto it = series_.find(clean_key); it != series_.end()) return *it->second.metric;
    if (regular_series_ < max_series_) {
      ++regular_series_;
      return *createLocked(std::move(clean_key), clean).metric;
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
  if (auto it = series_.find(other_key); it != series_.end()) return *it->second.metric;
  return *createLocked(std::move(other_key), other).metric;
}

template <typename T>
typename Family<T>::Series& Family<T>::createLocked(std::string key,
                                                    std::span<const std::string> values) {
  Series s;
  s.labels = renderLabels(label_names_, values);
  s.metric = makeMetric<T>(&bounds_);
  return series_.emplace(std::move(key), std::move(s)).first->second;
}

namespace {

void renderSeries(std::string& out, const std::string& name, const std::string& labels,
                  const Counter& c, const std::vector<std::string>&) {
  appendSampleName(out, name, "", labels);
  appendUint(out, c.value());
  out.push_back('\n');
}

void renderSeries(std::string& out, const std::string& name, const std::string& labels,
                  const Gauge& g, const std::vector<std::string>&) {
  appendSampleName(out, name, "", labels);
  appendInt(out, g.value());
  out.push_back('\n');
}

void renderSeries(std::string& out, const std::string& name, const std::string& labels,
                  const Histogram& h, const std::vector<std::string>& le) {
  Histogram::Snapshot snap = h.snapshot();
  std::string with_le;
  for (size_t i = 0; i < le.size(); ++i) {
    with_le.assign(labels);
    if (!with_le.empty()) with_le.push_back(',');
    with_le.append("le=\"");
    with_le.append(le[i]);
    with_le.push_back('"');
    appendSampleName(out, name, "_bucket", with_le);
    appendUint(out, snap.cumulative[i]);
    out.push_back('\n');
  }
  appendSampleName(out, name, "_sum", labels);
  appendDouble(out, snap.sum);
  out.push_back('\n');
  appendSampleName(out, name, "_count", labels);
  appendUint(out, snap.count);
  out.push_back('\n');
}

}  // namespace

template <typename T>
void Family<T>::render(std::string& out, Format format) const {
  renderHeader(out, format);
  std::lock_guard lock(mu_);
  for (const auto& [key, s] : series_) renderSeries(out, name_, s.labels, *s.metric, le_);
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
    samples_.emplace(std::move(key), Sample{renderLabels(names, clean), value});
  }

  void render(std::string& out) const {
    for (const auto& [key, s] : samples_) {
      appendSampleName(out, family_.name(), "", s.labels);
      appendDouble(out, s.value);
      out.push_back('\n');
    }
  }
  size_t size() const { return samples_.size(); }

 private:
  struct Sample {
    std::string labels;
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

void CallbackFamily::render(std::string& out, Format format) const {
  renderHeader(out, format);
  std::lock_guard lock(mu_);
  if (!collector_) return;
  CollectingSink sink(*this, overflow_);
  collector_(sink);
  sink.render(out);
}

// ----- Registry -------------------------------------------------------------------------------

Registry::Registry() {
  // Registered first and uncapped: its series count is bounded by the number of families.
  auto family = std::make_unique<CounterFamily>(
      "pgwarden_metrics_series_overflow_total",
      "Label-set lookups that exceeded their family's series cap and were counted under "
      "label values \"other\".",
      MetricType::kCounter, std::vector<std::string>{"family"}, SIZE_MAX, nullptr);
  checkName(family->name(), MetricType::kCounter, family->labelNames());
  overflow_ = family.get();
  families_.push_back(std::move(family));
}

Registry::~Registry() = default;

void Registry::checkName(const std::string& name, MetricType type,
                         const std::vector<std::string>& label_names) {
  if (!validMetricName(name)) throw std::invalid_argument("invalid metric name: " + name);
  bool total = endsWith(name, "_total");
  if (type == MetricType::kCounter && (!total || name.size() == 6)) {
    throw std::invalid_argument("counter name must end in _total: " + name);
  }
  if (type != MetricType::kCounter && total) {
    throw std::invalid_argument("only counter names end in _total: " + name);
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& l = label_names[i];
    if (!validLabelName(l)) throw std::invalid_argument(name + ": invalid label name " + l);
    if (type == MetricType::kHistogram && l == "le") {
      throw std::invalid_argument(name + ": label le is reserved for histogram buckets");
    }
    if (std::find(label_names.begin(), label_names.begin() + static_cast<ptrdiff_t>(i), l) !=
        label_names.begin() + static_cast<ptrdiff_t>(i)) {
      throw std::invalid_argument(name + ": duplicate label name " + l);
    }
  }
  if (label_names.size() > kMaxLabels) throw std::invalid_argument(name + ": too many labels");
  // Every name a family can occupy, in either format, must be free.
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
  Counter* overflow = overflowCounterFor(name);
  return add(std::make_unique<CounterFamily>(std::move(name), std::move(help), MetricType::kCounter,
                                             std::move(label_names), max_series, overflow));
}

GaugeFamily& Registry::gaugeFamily(std::string name, std::string help,
                                   std::vector<std::string> label_names, size_t max_series) {
  std::lock_guard lock(mu_);
  checkName(name, MetricType::kGauge, label_names);
  Counter* overflow = overflowCounterFor(name);
  return add(std::make_unique<GaugeFamily>(std::move(name), std::move(help), MetricType::kGauge,
                                           std::move(label_names), max_series, overflow));
}

HistogramFamily& Registry::histogramFamily(std::string name, std::string help,
                                           std::vector<std::string> label_names,
                                           std::vector<double> bounds, size_t max_series) {
  std::lock_guard lock(mu_);
  checkName(name, MetricType::kHistogram, label_names);
  if (bounds.empty()) throw std::invalid_argument(name + ": histogram needs bucket bounds");
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
      throw std::invalid_argument(name + ": bucket bounds must be finite and increasing");
    }
  }
  Counter* overflow = overflowCounterFor(name);
  return add(std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                               MetricType::kHistogram, std::move(label_names),
                                               max_series, overflow, std::move(bounds)));
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

void Registry::render(std::string& out, Format format) const {
  std::lock_guard lock(mu_);
  for (const auto& family : families_) family->render(out, format);
  if (format == Format::kOpenMetrics) out.append("# EOF\n");
}

std::string Registry::render(Format format) const {
  std::string out;
  out.reserve(16384);
  render(out, format);
  return out;
}

// ----- the catalogue --------------------------------------------------------------------------

const char* outcomeLabel(StatementOutcome outcome) {
  switch (outcome) {
    case StatementOutcome::kOk:
      return "ok";
    case StatementOutcome::kError:
      return "error";
    case StatementOutcome::kDenied:
      return "denied";
    case StatementOutcome::kCancelled:
      return "cancelled";
    case StatementOutcome::kClientGone:
      return "client_gone";
    case StatementOutcome::kBudget:
      return "budget";
    case StatementOutcome::kAborted:
      return "aborted";
  }
  return "other";
}

const char* intentLabel(StatementIntent intent) {
  switch (intent) {
    case StatementIntent::kCatalog:
      return "catalog";
    case StatementIntent::kLookup:
      return "lookup";
    case StatementIntent::kAggregation:
      return "aggregation";
    case StatementIntent::kWrite:
      return "write";
    case StatementIntent::kDdl:
      return "ddl";
    case StatementIntent::kAdmin:
      return "admin";
    case StatementIntent::kOther:
      return "other";
  }
  return "other";
}

Metrics::Metrics(const BuildInfo& build)
    : client_connections(registry.callbackFamily(
          "pgwarden_client_connections",
          "Client connections by session state (startup, idle, active, waiting, closing).",
          MetricType::kGauge, {"state"})),
      server_connections(
          registry.callbackFamily("pgwarden_server_connections",
                                  "Server connections by pool (server role/database) and state.",
                                  MetricType::kGauge, {"pool", "state"})),
      client_connections_accepted(registry.counter("pgwarden_client_connections_accepted_total",
                                                   "Client connections accepted.")),
      client_connections_rejected(registry.counterFamily(
          "pgwarden_client_connections_rejected_total",
          "Client connections refused, by reason (max_connections, auth_failure, "
          "startup_timeout, bad_protocol).",
          {"reason"})),
      statements(registry.counterFamily("pgwarden_statements_total",
                                        "Statements by policy group, outcome and inferred intent.",
                                        {"group", "outcome", "intent"})),
      statement_duration(registry.histogramFamily(
          "pgwarden_statement_duration_seconds",
          "Statement duration from receipt to the last byte sent to the client.",
          {"group", "outcome"}, kStatementDurationBuckets)),
      guard_duration(registry.histogramFamily("pgwarden_guard_duration_seconds",
                                              "Time spent evaluating one guard, by guard kind.",
                                              {"guard"}, kGuardDurationBuckets)),
      rows_returned(registry.counterFamily(
          "pgwarden_rows_returned_total", "Rows returned to clients, by policy group.", {"group"})),
      statements_truncated(registry.counterFamily(
          "pgwarden_statements_truncated_total",
          "Statements whose result was cut at the group's row limit.", {"group"})),
      guard_decisions(registry.counterFamily(
          "pgwarden_guard_decisions_total",
          "Non-allow guard verdicts by group, guard kind, action (deny, warn, rewrite) and code.",
          {"group", "guard", "action", "code"}, 2000)),
      budget_exhausted(registry.counterFamily(
          "pgwarden_budget_exhausted_total",
          "Statements refused because a conversation or user budget was exhausted.", {"group"})),
      conversations_live(registry.gauge("pgwarden_conversations_live",
                                        "Conversations with budget state held in memory.")),
      upstream_connect_errors(registry.counterFamily(
          "pgwarden_upstream_connect_errors_total",
          "Failed attempts to open a server connection, by reason (too_many_connections, "
          "auth_failed, refused, timeout, other).",
          {"reason"}, 10)),
      upstream_server_errors(registry.counterFamily(
          "pgwarden_upstream_server_errors_total",
          "ErrorResponses from PostgreSQL by SQLSTATE class (first two characters).",
          {"sqlstate_class"}, 100)),
      upstream_cancel_requests(registry.counter("pgwarden_upstream_cancel_requests_total",
                                                "CancelRequests forwarded to PostgreSQL.")),
      history_records_written(registry.callbackFamily("pgwarden_history_records_written_total",
                                                      "Query-history records written to the store.",
                                                      MetricType::kCounter, {"store"})),
      history_records_dropped(registry.callbackFamily(
          "pgwarden_history_records_dropped_total",
          "Query-history records dropped because the queue was full or the store failed.",
          MetricType::kCounter, {"store"})),
      history_write_errors(registry.callbackFamily("pgwarden_history_write_errors_total",
                                                   "Failed writes to the query-history store.",
                                                   MetricType::kCounter, {"store"})),
      history_queue_depth(registry.callbackFamily("pgwarden_history_queue_depth",
                                                  "Records waiting in the query-history queue.",
                                                  MetricType::kGauge, {"store"})),
      history_store_up(registry.callbackFamily(
          "pgwarden_history_store_up",
          "1 while the query-history store takes writes, 0 while it is down (records queue).",
          MetricType::kGauge, {"store"})),
      external_guard_calls(registry.counterFamily("pgwarden_external_guard_calls_total",
                                                  "Calls to webhook and Lua guards, by kind.",
                                                  {"kind"}, 10)),
      external_guard_failures(registry.counterFamily(
          "pgwarden_external_guard_failures_total",
          "Webhook and Lua guard calls that failed (error, bad reply), by kind.", {"kind"}, 10)),
      external_guard_timeouts(registry.counterFamily(
          "pgwarden_external_guard_timeouts_total",
          "Webhook and Lua guard calls that hit their time or instruction limit, by kind.",
          {"kind"}, 10)),
      external_guard_duration(registry.histogramFamily(
          "pgwarden_external_guard_duration_seconds",
          "Latency of webhook and Lua guard calls, by kind.", {"kind"}, kExternalCallBuckets, 10)),
      http_requests(registry.counterFamily(
          "pgwarden_http_requests_total",
          "Requests to the metrics/health HTTP endpoint, by handler and status code.",
          {"handler", "code"}, 100)),
      http_scrapes(registry.counterFamily("pgwarden_http_scrapes_total",
                                          "Scrapes of /metrics by exposition format.", {"format"},
                                          4)),
      http_connections_rejected(registry.counterFamily(
          "pgwarden_http_connections_rejected_total",
          "HTTP connections closed without a response: over the client limit or timed out.",
          {"reason"}, 10)) {
  // Known bounded label values start at zero, so rate() sees their first increment.
  for (const char* reason :
       {"max_connections", "auth_failure", "startup_timeout", "bad_protocol"}) {
    client_connections_rejected.with({reason});
  }
  for (const char* kind : {"webhook", "lua"}) {
    external_guard_calls.with({kind});
    external_guard_failures.with({kind});
    external_guard_timeouts.with({kind});
    external_guard_duration.with({kind});
  }
  registerProcessMetrics(registry, build);
}

void Metrics::setHistorySource(std::string store, std::function<HistorySnapshot()> source) {
  auto shared = std::make_shared<std::function<HistorySnapshot()>>(std::move(source));
  auto bind = [&](CallbackFamily& family, uint64_t HistorySnapshot::*field) {
    family.setCollector([shared, store, field](SampleSink& sink) {
      HistorySnapshot s = (*shared)();
      sink.add({store}, static_cast<double>(s.*field));
    });
  };
  bind(history_records_written, &HistorySnapshot::written);
  bind(history_records_dropped, &HistorySnapshot::dropped);
  bind(history_write_errors, &HistorySnapshot::write_errors);
  bind(history_queue_depth, &HistorySnapshot::queue_depth);
  bind(history_store_up, &HistorySnapshot::store_up);
}

GroupSeries::GroupSeries(Metrics& metrics, std::string group)
    : metrics_(metrics),
      group_(std::move(group)),
      rows_returned_(metrics.rows_returned.with({group_})),
      truncated_(metrics.statements_truncated.with({group_})),
      budget_exhausted_(metrics.budget_exhausted.with({group_})) {}

Counter& GroupSeries::statements(StatementOutcome outcome, StatementIntent intent) {
  size_t i = static_cast<size_t>(outcome) * kStatementIntentCount + static_cast<size_t>(intent);
  Counter* c = statements_[i].load(std::memory_order_acquire);
  if (c == nullptr) {
    c = &metrics_.statements.with({group_, outcomeLabel(outcome), intentLabel(intent)});
    statements_[i].store(c, std::memory_order_release);
  }
  return *c;
}

Histogram& GroupSeries::duration(StatementOutcome outcome) {
  size_t i = static_cast<size_t>(outcome);
  Histogram* h = durations_[i].load(std::memory_order_acquire);
  if (h == nullptr) {
    h = &metrics_.statement_duration.with({group_, outcomeLabel(outcome)});
    durations_[i].store(h, std::memory_order_release);
  }
  return *h;
}

}  // namespace pgwarden::daemon::metrics
