// A small Prometheus metrics registry: counters, gauges and histograms in labelled families,
// gauges and counters computed at scrape time by callbacks, and the text exposition format
// (version 0.0.4) that /metrics serves.
//
// Recording is lock-free: a Counter, Gauge or Histogram is a few atomics, and a family hands
// out references that stay valid for the registry's lifetime, so hot paths resolve their
// labels once (Family::WithLabels takes the family's mutex) and keep the reference.
// Nothing here knows gpucompute's metric names: see server_metrics.h.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace gpucompute::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// A monotonically increasing value. Thread-safe.
class Counter {
 public:
  void Increment(double by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down. Thread-safe.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into buckets with inclusive upper bounds (Prometheus `le`), plus an
// implicit +Inf bucket, a sum and a count. Buckets are kept per bucket (not cumulative) so an
// observation touches one bucket; the exposition accumulates them. Thread-safe; a scrape
// racing observations may see a sum that lags its buckets by those observations, never a
// count that disagrees with the buckets (the count is their total).
class Histogram {
 public:
  // `bounds`: finite, strictly increasing upper bounds.
  explicit Histogram(std::vector<double> bounds);

  void Observe(double v) { ObserveN(v, 1); }
  // `n` observations of the same value (one bucket add): a batch's compute time once per
  // request in it.
  void ObserveN(double v, uint64_t n);

  const std::vector<double>& bounds() const { return bounds_; }
  // Per-bucket (not cumulative) counts, bounds().size() + 1 of them (the last is +Inf).
  std::vector<uint64_t> BucketCounts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

// `count` bounds start, start*factor, start*factor^2, ...
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// Label values compare against stored keys without building a vector<string> per lookup.
struct LabelValuesLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](const auto& x, const auto& y) { return absl::string_view(x) < absl::string_view(y); });
  }
};

class Registry;

// One metric name and its series, one per distinct tuple of label values. Owned by the
// Registry; never destroyed before it.
template <typename Metric>
class Family {
 public:
  // The series with these label values (one per label name, in order), created on first use.
  // The reference is valid for the registry's lifetime. Takes the family's mutex: on hot paths
  // resolve once and keep the reference. A wrong number of values is a programming error
  // (logged; the values are padded or cut to fit).
  Metric& WithLabels(absl::Span<const absl::string_view> values);
  Metric& WithLabels(std::initializer_list<absl::string_view> values) {
    return WithLabels(absl::MakeConstSpan(values.begin(), values.size()));
  }
  // The series of a family without labels.
  Metric& Get() { return WithLabels(absl::Span<const absl::string_view>()); }

  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

 private:
  friend class Registry;
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bounds)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}
  void Expose(std::string* out) const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;  // histograms only
  mutable absl::Mutex mu_;
  // Sorted by label values: the exposition is in a stable order.
  std::map<std::vector<std::string>, std::unique_ptr<Metric>, LabelValuesLess> series_
      ABSL_GUARDED_BY(mu_);
};

// A sample a callback family returns at scrape time.
struct Sample {
  std::vector<std::string> label_values;  // one per label name, in order
  double value = 0;
};

// Computes a callback family's samples. Runs on the scraping thread, without any registry
// lock held; it must not register metrics.
using CollectFn = std::function<std::vector<Sample>()>;

// Every family of one server. Thread-safe. Names follow Prometheus rules
// ([a-zA-Z_:][a-zA-Z0-9_:]*, labels [a-zA-Z_][a-zA-Z0-9_]*, `le` reserved); registering an
// invalid or duplicate name is a programming error and aborts, since every name is a constant
// in the code and a test scrapes them all.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // A family without labels gets its one series at once, so it is exposed (as 0) before
  // anything is recorded.
  Family<Counter>& AddCounter(std::string name, std::string help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(std::string name, std::string help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> label_names, std::vector<double> bounds);
  // A counter or gauge family whose samples `collect` computes at each scrape (values another
  // component already keeps: device memory, kernel-cache statistics, resident models).
  // Whatever `collect` captures must outlive every scrape.
  void AddCallback(MetricType type, std::string name, std::string help,
                   std::vector<std::string> label_names, CollectFn collect);

  // Every family in the Prometheus text format 0.0.4, in registration order, each with
  // # HELP and # TYPE lines.
  std::string Expose() const;

 private:
  struct Entry {
    MetricType type;
    Family<Counter>* counter = nullptr;
    Family<Gauge>* gauge = nullptr;
    Family<Histogram>* histogram = nullptr;
    // Callback families:
    std::string name, help;
    std::vector<std::string> label_names;
    CollectFn collect;
  };
  void CheckNew(const std::string& name, const std::vector<std::string>& label_names) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps `family` in `families` and lists it as an entry (`slot`: its pointer in Entry). An
  // unlabelled family gets its one series now, so that it is exported before its first use.
  template <typename T>
  Family<T>& AddFamily(std::vector<std::unique_ptr<Family<T>>>& families, MetricType type,
                       Family<T>* Entry::*slot, std::unique_ptr<Family<T>> family)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // unique_ptr: entries and families keep their addresses as the vectors grow.
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Counter>>> counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_ ABSL_GUARDED_BY(mu_);
};

// The text format's number: integers without a fraction, shortest round-trip otherwise,
// +Inf, -Inf and NaN spelled as Prometheus spells them.
std::string FormatValue(double v);

// The content type /metrics answers with.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace gpucompute::metrics
