// Metrics: wardend's in-process metrics registry, rendered in the Prometheus
// text exposition format 0.0.4 for the admin port's GET /metrics.
//
// Families are registered once at startup and live as long as the registry;
// the hot path (Add / Set / Observe) takes only its family's mutex and does
// not allocate when the label set has been seen before. Families render in
// name order and series in label order, so a scrape is stable and diffable.
//
//   Metrics metrics;
//   ASSIGN_OR_RETURN(CounterFamily* runs,
//                    metrics.Counter("warden_runs_total", "Executions finished."));
//   runs->Add({{"language", "python"}, {"outcome", "ok"}});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace warden {

// Label name -> value. A std::map, so one label set has exactly one spelling.
// Names should match [a-zA-Z_][a-zA-Z0-9_]*; other characters are rendered
// as '_'. Values are arbitrary UTF-8 and are escaped on output.
using MetricLabels = std::map<std::string, std::string>;

// `count` upper bounds start, start*factor, start*factor^2, ... (start > 0,
// factor > 1, count >= 1), e.g. ExponentialBuckets(0.001, 2, 16) for
// latencies from 1 ms to ~33 s. Returns an empty vector for bad arguments.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

namespace metrics_internal {

// What every family shares: a name, a help text and a way to render itself.
class Family {
 public:
  Family(std::string name, std::string help) : name_(std::move(name)), help_(std::move(help)) {}
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  virtual absl::string_view type() const = 0;  // "counter", "gauge", "histogram"

  // Appends "# HELP", "# TYPE" and every sample line to `out`.
  void Render(std::string& out) const;

 protected:
  virtual void RenderSamples(std::string& out) const = 0;

 private:
  const std::string name_;
  const std::string help_;
};

// One double per label set; counters and gauges differ only in what the
// public wrappers let callers do with it.
class ScalarFamily : public Family {
 public:
  using Family::Family;
  double Value(const MetricLabels& labels) const;  // 0 for a label set never touched

 protected:
  void AddTo(const MetricLabels& labels, double delta);
  void SetTo(const MetricLabels& labels, double value);
  void RenderSamples(std::string& out) const override;

 private:
  struct Series {
    std::string rendered_labels;  // `{a="x",b="y"}`, or empty
    double value = 0;
  };
  Series& FindOrAdd(const MetricLabels& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<MetricLabels, Series> series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics_internal

// A monotonically increasing count (name conventionally ends in _total).
class CounterFamily final : public metrics_internal::ScalarFamily {
 public:
  using ScalarFamily::ScalarFamily;
  absl::string_view type() const override { return "counter"; }

  // Adds `value` to the series for `labels`, creating it at 0. Negative and
  // NaN values are ignored: a counter never goes down.
  void Add(const MetricLabels& labels, double value = 1);
};

// A value that goes up and down (queue depth, bytes in use).
class GaugeFamily final : public metrics_internal::ScalarFamily {
 public:
  using ScalarFamily::ScalarFamily;
  absl::string_view type() const override { return "gauge"; }

  void Set(const MetricLabels& labels, double value);
  void Add(const MetricLabels& labels, double delta);  // negative to subtract
};

// Observations counted into fixed buckets, rendered as cumulative
// name_bucket{le="..."} lines plus name_sum and name_count. The +Inf bucket
// is implicit. A user label called "le" would clash with the bucket label
// and is dropped.
class HistogramFamily final : public metrics_internal::Family {
 public:
  // `upper_bounds` must be strictly increasing and finite (checked by
  // Metrics::Histogram).
  HistogramFamily(std::string name, std::string help, std::vector<double> upper_bounds);
  absl::string_view type() const override { return "histogram"; }

  // NaN observations are ignored (they would poison _sum forever).
  void Observe(const MetricLabels& labels, double value);

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  uint64_t Count(const MetricLabels& labels) const;  // 0 for a label set never observed

 protected:
  void RenderSamples(std::string& out) const override;

 private:
  struct Series {
    std::string label_prefix;             // `a="x",b="y",` (ready for le=), or empty
    std::string rendered_labels;          // `{a="x",b="y"}`, or empty
    std::vector<uint64_t> bucket_counts;  // per bucket, not cumulative; last is +Inf
    double sum = 0;
    uint64_t count = 0;
  };

  const std::vector<double> upper_bounds_;
  const std::vector<std::string> rendered_bounds_;  // le values, "+Inf" last
  mutable absl::Mutex mu_;
  std::map<MetricLabels, Series> series_ ABSL_GUARDED_BY(mu_);
};

// A gauge whose samples are computed at scrape time (pool sizes, live
// sessions), so nothing has to keep a gauge in step with the source of truth.
class GaugeCallbackFamily final : public metrics_internal::Family {
 public:
  using Samples = std::vector<std::pair<MetricLabels, double>>;
  using Callback = std::function<Samples()>;

  GaugeCallbackFamily(std::string name, std::string help, Callback callback)
      : Family(std::move(name), std::move(help)), callback_(std::move(callback)) {}
  absl::string_view type() const override { return "gauge"; }

 protected:
  // Runs the callback without any registry lock held. Samples are sorted by
  // labels; for a label set returned twice the last value wins.
  void RenderSamples(std::string& out) const override;

 private:
  const Callback callback_;
};

// The registry. Thread-safe; families it hands out stay valid (and at the
// same address) for the registry's lifetime.
class Metrics {
 public:
  Metrics() = default;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Registering a name again with the same type (and help, and buckets)
  // returns the existing family, so independent components may share one;
  // anything else under a taken name is AlreadyExists. An invalid name
  // (not [a-zA-Z_:][a-zA-Z0-9_:]*) is InvalidArgument.
  absl::StatusOr<CounterFamily*> Counter(absl::string_view name, absl::string_view help);
  absl::StatusOr<GaugeFamily*> Gauge(absl::string_view name, absl::string_view help);
  absl::StatusOr<HistogramFamily*> Histogram(absl::string_view name, absl::string_view help,
                                             std::vector<double> upper_bounds);

  // `callback` runs on the scraping thread, concurrently with anything else
  // and possibly with itself, so it must be thread-safe; whatever it captures
  // must outlive every Render() call (stop the admin server before
  // destroying it). A name can hold only one callback: AlreadyExists.
  absl::Status GaugeCallback(absl::string_view name, absl::string_view help,
                             GaugeCallbackFamily::Callback callback);

  // The whole registry in text format 0.0.4.
  std::string Render() const;

 private:
  template <typename T, typename... Args>
  absl::StatusOr<T*> Register(absl::string_view name, absl::string_view help,
                              const std::function<bool(const T&)>& same, Args&&... args);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<metrics_internal::Family>, std::less<>> families_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace warden
