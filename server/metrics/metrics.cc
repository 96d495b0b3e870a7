// Metrics registry and text exposition (see metrics.h).
#include "server/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gpucompute::metrics {
namespace {

bool ValidName(absl::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// To stderr, not the log: the process is about to abort (and death tests read stderr).
[[noreturn]] void Misuse(const std::string& what) {
  std::fprintf(stderr, "metrics registry misuse: %s\n", what.c_str());
  std::abort();
}

void AppendEscaped(absl::string_view s, bool quote, std::string* out) {
  for (const char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (quote && c == '"') {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

void AppendHeader(absl::string_view name, absl::string_view help, absl::string_view type,
                  std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ");
  AppendEscaped(help, /*quote=*/false, out);
  absl::StrAppend(out, "\n# TYPE ", name, " ", type, "\n");
}

// `{a="x",b="y"}` (with `le` last when given), or nothing for no labels.
void AppendLabels(const std::vector<std::string>& names, absl::Span<const std::string> values,
                  const char* le, std::string* out) {
  if (names.empty() && le == nullptr) return;
  out->push_back('{');
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out->push_back(',');
    absl::StrAppend(out, names[i], "=\"");
    AppendEscaped(i < values.size() ? absl::string_view(values[i]) : "", /*quote=*/true, out);
    out->push_back('"');
  }
  if (le != nullptr) absl::StrAppend(out, names.empty() ? "" : ",", "le=\"", le, "\"");
  out->push_back('}');
}

void AppendSample(absl::string_view name, const std::vector<std::string>& label_names,
                  absl::Span<const std::string> values, const char* le, double value,
                  std::string* out) {
  out->append(name.data(), name.size());
  AppendLabels(label_names, values, le, out);
  absl::StrAppend(out, " ", FormatValue(value), "\n");
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Integral values (counts, bytes) print exactly as integers up to 2^63.
  if (v == std::trunc(v) && std::fabs(v) < 9.2e18) {
    const auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(v));
    return std::string(buf, r.ptr);
  }
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

// ---- Histogram

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::ObserveN(double v, uint64_t n) {
  if (n == 0) return;
  // First bound >= v: `le` is inclusive. NaN lands in +Inf.
  const size_t i = std::isnan(v) ? bounds_.size()
                                 : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                                       bounds_.begin());
  counts_[i].fetch_add(n, std::memory_order_relaxed);
  if (!std::isnan(v)) sum_.fetch_add(v * static_cast<double>(n), std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::BucketCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  for (size_t i = 0; i < out.size(); ++i) out[i] = counts_[i].load(std::memory_order_relaxed);
  return out;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  out.reserve(std::max(count, 0));
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) out.push_back(b);
  return out;
}

// ---- Family

template <typename Metric>
Metric& Family<Metric>::WithLabels(absl::Span<const absl::string_view> values) {
  absl::MutexLock lock(&mu_);
  if (auto it = series_.find(values); it != series_.end()) return *it->second;
  std::vector<std::string> key(values.begin(), values.end());
  if (key.size() != label_names_.size()) {
    spdlog::error("metric {}: {} label values for {} labels", name_, key.size(),
                  label_names_.size());
    key.resize(label_names_.size());
    if (auto it = series_.find(key); it != series_.end()) return *it->second;
  }
  std::unique_ptr<Metric> metric;
  if constexpr (std::is_same_v<Metric, Histogram>) {
    metric = std::make_unique<Histogram>(bounds_);
  } else {
    metric = std::make_unique<Metric>();
  }
  Metric& ref = *metric;
  series_.emplace(std::move(key), std::move(metric));
  return ref;
}

template <>
void Family<Counter>::Expose(std::string* out) const {
  AppendHeader(name_, help_, "counter", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, c] : series_) AppendSample(name_, label_names_, values, nullptr, c->value(), out);
}

template <>
void Family<Gauge>::Expose(std::string* out) const {
  AppendHeader(name_, help_, "gauge", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [values, g] : series_) AppendSample(name_, label_names_, values, nullptr, g->value(), out);
}

template <>
void Family<Histogram>::Expose(std::string* out) const {
  AppendHeader(name_, help_, "histogram", out);
  const std::string bucket = name_ + "_bucket";
  const std::string sum = name_ + "_sum";
  const std::string count = name_ + "_count";
  absl::MutexLock lock(&mu_);
  for (const auto& [values, h] : series_) {
    const std::vector<uint64_t> counts = h->BucketCounts();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      cumulative += counts[i];
      const std::string le = i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf";
      AppendSample(bucket, label_names_, values, le.c_str(), static_cast<double>(cumulative), out);
    }
    AppendSample(sum, label_names_, values, nullptr, h->sum(), out);
    AppendSample(count, label_names_, values, nullptr, static_cast<double>(cumulative), out);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- Registry

void Registry::CheckNew(const std::string& name, const std::vector<std::string>& label_names) const {
  if (!ValidName(name, /*allow_colon=*/true)) Misuse(absl::StrCat("invalid metric name '", name, "'"));
  for (const auto& l : label_names) {
    if (!ValidName(l, /*allow_colon=*/false) || l == "le" || absl::StartsWith(l, "__")) {
      Misuse(absl::StrCat("metric ", name, ": invalid label name '", l, "'"));
    }
  }
  for (const auto& e : entries_) {
    const std::string& existing = e->counter     ? e->counter->name()
                                  : e->gauge     ? e->gauge->name()
                                  : e->histogram ? e->histogram->name()
                                                 : e->name;
    if (existing == name) Misuse(absl::StrCat("metric ", name, " registered twice"));
  }
}

template <typename T>
Family<T>& Registry::AddFamily(std::vector<std::unique_ptr<Family<T>>>& families, MetricType type,
                               Family<T>* Entry::*slot, std::unique_ptr<Family<T>> family) {
  Family<T>* f = family.get();
  families.push_back(std::move(family));
  auto e = std::make_unique<Entry>();
  e->type = type;
  (*e).*slot = f;
  entries_.push_back(std::move(e));
  if (f->label_names().empty()) f->Get();
  return *f;
}

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  CheckNew(name, label_names);
  return AddFamily(counters_, MetricType::kCounter, &Entry::counter,
                   std::unique_ptr<Family<Counter>>(new Family<Counter>(
                       std::move(name), std::move(help), std::move(label_names), {})));
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  CheckNew(name, label_names);
  return AddFamily(gauges_, MetricType::kGauge, &Entry::gauge,
                   std::unique_ptr<Family<Gauge>>(new Family<Gauge>(
                       std::move(name), std::move(help), std::move(label_names), {})));
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  CheckNew(name, label_names);
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      Misuse(absl::StrCat("histogram ", name, ": bounds must be finite and strictly increasing"));
    }
  }
  return AddFamily(histograms_, MetricType::kHistogram, &Entry::histogram,
                   std::unique_ptr<Family<Histogram>>(
                       new Family<Histogram>(std::move(name), std::move(help),
                                             std::move(label_names), std::move(bounds))));
}

void Registry::AddCallback(MetricType type, std::string name, std::string help,
                           std::vector<std::string> label_names, CollectFn collect) {
  absl::MutexLock lock(&mu_);
  CheckNew(name, label_names);
  if (type == MetricType::kHistogram) Misuse(absl::StrCat("metric ", name, ": no callback histograms"));
  auto e = std::make_unique<Entry>();
  e->type = type;
  e->name = std::move(name);
  e->help = std::move(help);
  e->label_names = std::move(label_names);
  e->collect = std::move(collect);
  entries_.push_back(std::move(e));
}

std::string Registry::Expose() const {
  // Entries are never removed and keep their addresses: expose them outside the registry
  // lock, so a slow callback (a device query) holds up no registration.
  std::vector<const Entry*> entries;
  {
    absl::MutexLock lock(&mu_);
    entries.reserve(entries_.size());
    for (const auto& e : entries_) entries.push_back(e.get());
  }
  std::string out;
  out.reserve(entries.size() * 256);
  for (const Entry* e : entries) {
    if (e->counter) {
      e->counter->Expose(&out);
    } else if (e->gauge) {
      e->gauge->Expose(&out);
    } else if (e->histogram) {
      e->histogram->Expose(&out);
    } else {
      AppendHeader(e->name, e->help, TypeName(e->type), &out);
      std::vector<Sample> samples = e->collect ? e->collect() : std::vector<Sample>();
      std::sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) {
        return a.label_values < b.label_values;
      });
      for (const Sample& s : samples) AppendSample(e->name, e->label_names, s.label_values, nullptr, s.value, &out);
    }
  }
  return out;
}

}  // namespace gpucompute::metrics
