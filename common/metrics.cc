// Metrics registry and its text-format 0.0.4 rendering. The format is
// specified at https://prometheus.io/docs/instrumenting/exposition_formats/.
#include "common/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace warden {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

bool IsValidMetricName(absl::string_view name) {
  if (name.empty() || !(IsNameStart(name[0]) || name[0] == ':')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return IsNameChar(c) || c == ':'; });
}

// Label names come from code, so a bad one is a programmer error; rendering it
// with '_' keeps the whole scrape parseable instead of failing it.
void AppendLabelName(std::string& out, absl::string_view name) {
  if (name.empty() || !IsNameStart(name[0])) out += '_';
  for (char c : name) out += IsNameChar(c) ? c : '_';
}

// Label values escape backslash, double quote and newline.
void AppendLabelValue(std::string& out, absl::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

// HELP text escapes backslash and newline only.
void AppendHelp(std::string& out, absl::string_view help) {
  for (char c : help) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

// `a="x",b="y"` with no braces; `skip` names a label to leave out.
std::string RenderLabelList(const MetricLabels& labels, absl::string_view skip = {}) {
  std::string out;
  for (const auto& [name, value] : labels) {
    if (!skip.empty() && name == skip) continue;
    if (!out.empty()) out += ',';
    AppendLabelName(out, name);
    out += "=\"";
    AppendLabelValue(out, value);
    out += '"';
  }
  return out;
}

std::string Braced(std::string list) { return list.empty() ? list : absl::StrCat("{", list, "}"); }

// Integers print as integers (a counter of 1000000 reads "1000000", not
// "1e+06"); everything else as the shortest string that round-trips.
void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0 /* 2^53 */) {
    absl::StrAppend(&out, static_cast<int64_t>(v));
  } else {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    out.append(buf, end);
  }
}

std::string FormatValue(double v) {
  std::string out;
  AppendValue(out, v);
  return out;
}

void AppendSample(std::string& out, absl::string_view name, absl::string_view suffix,
                  absl::string_view rendered_labels, double value) {
  absl::StrAppend(&out, name, suffix, rendered_labels, " ");
  AppendValue(out, value);
  out += '\n';
}

std::vector<std::string> RenderBounds(const std::vector<double>& upper_bounds) {
  std::vector<std::string> out;
  out.reserve(upper_bounds.size() + 1);
  for (double b : upper_bounds) out.push_back(FormatValue(b));
  out.push_back("+Inf");
  return out;
}

}  // namespace

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) return {};
  std::vector<double> out;
  out.reserve(count);
  for (double b = start; count > 0; --count, b *= factor) out.push_back(b);
  return out;
}

namespace metrics_internal {

void Family::Render(std::string& out) const {
  absl::StrAppend(&out, "# HELP ", name_, " ");
  AppendHelp(out, help_);
  absl::StrAppend(&out, "\n# TYPE ", name_, " ", type(), "\n");
  RenderSamples(out);
}

ScalarFamily::Series& ScalarFamily::FindOrAdd(const MetricLabels& labels) {
  auto it = series_.find(labels);  // no allocation on the common path
  if (it == series_.end()) {
    it = series_.try_emplace(labels, Series{Braced(RenderLabelList(labels)), 0}).first;
  }
  return it->second;
}

void ScalarFamily::AddTo(const MetricLabels& labels, double delta) {
  absl::MutexLock lock(&mu_);
  FindOrAdd(labels).value += delta;
}

void ScalarFamily::SetTo(const MetricLabels& labels, double value) {
  absl::MutexLock lock(&mu_);
  FindOrAdd(labels).value = value;
}

double ScalarFamily::Value(const MetricLabels& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.value;
}

void ScalarFamily::RenderSamples(std::string& out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, series] : series_) {
    AppendSample(out, name(), "", series.rendered_labels, series.value);
  }
}

}  // namespace metrics_internal

void CounterFamily::Add(const MetricLabels& labels, double value) {
  if (!(value >= 0)) return;  // negative or NaN
  AddTo(labels, value);
}

void GaugeFamily::Set(const MetricLabels& labels, double value) { SetTo(labels, value); }
void GaugeFamily::Add(const MetricLabels& labels, double delta) { AddTo(labels, delta); }

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<double> upper_bounds)
    : Family(std::move(name), std::move(help)),
      upper_bounds_(std::move(upper_bounds)),
      rendered_bounds_(RenderBounds(upper_bounds_)) {}

void HistogramFamily::Observe(const MetricLabels& labels, double value) {
  if (std::isnan(value)) return;
  // Buckets are "less than or equal": the first bound >= value takes it.
  const size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  absl::MutexLock lock(&mu_);
  auto it = series_.find(labels);
  if (it == series_.end()) {
    std::string list = RenderLabelList(labels, "le");
    Series series;
    series.label_prefix = list.empty() ? "" : absl::StrCat(list, ",");
    series.rendered_labels = Braced(std::move(list));
    series.bucket_counts.assign(upper_bounds_.size() + 1, 0);
    it = series_.try_emplace(labels, std::move(series)).first;
  }
  Series& s = it->second;
  ++s.bucket_counts[bucket];
  s.sum += value;
  ++s.count;
}

uint64_t HistogramFamily::Count(const MetricLabels& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0 : it->second.count;
}

void HistogramFamily::RenderSamples(std::string& out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, s] : series_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < s.bucket_counts.size(); ++i) {
      cumulative += s.bucket_counts[i];
      absl::StrAppend(&out, name(), "_bucket{", s.label_prefix, "le=\"", rendered_bounds_[i],
                      "\"} ", cumulative, "\n");
    }
    AppendSample(out, name(), "_sum", s.rendered_labels, s.sum);
    absl::StrAppend(&out, name(), "_count", s.rendered_labels, " ", s.count, "\n");
  }
}

void GaugeCallbackFamily::RenderSamples(std::string& out) const {
  Samples samples = callback_();
  std::stable_sort(samples.begin(), samples.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i + 1 < samples.size() && samples[i + 1].first == samples[i].first) continue;
    AppendSample(out, name(), "", Braced(RenderLabelList(samples[i].first)), samples[i].second);
  }
}

template <typename T, typename... Args>
absl::StatusOr<T*> Metrics::Register(absl::string_view name, absl::string_view help,
                                     const std::function<bool(const T&)>& same, Args&&... args) {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric name \"", name, "\" is invalid: it must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    T* existing = dynamic_cast<T*>(it->second.get());
    if (existing != nullptr && existing->help() == help && same(*existing)) return existing;
    return absl::AlreadyExistsError(
        absl::StrCat("metric \"", name, "\" is already registered as a ", it->second->type(),
                     "; register it once and share the family, or pick another name"));
  }
  auto family =
      std::make_unique<T>(std::string(name), std::string(help), std::forward<Args>(args)...);
  T* raw = family.get();
  families_.emplace(std::string(name), std::move(family));
  return raw;
}

absl::StatusOr<CounterFamily*> Metrics::Counter(absl::string_view name, absl::string_view help) {
  return Register<CounterFamily>(name, help, [](const CounterFamily&) { return true; });
}

absl::StatusOr<GaugeFamily*> Metrics::Gauge(absl::string_view name, absl::string_view help) {
  return Register<GaugeFamily>(name, help, [](const GaugeFamily&) { return true; });
}

absl::StatusOr<HistogramFamily*> Metrics::Histogram(absl::string_view name, absl::string_view help,
                                                    std::vector<double> upper_bounds) {
  if (!upper_bounds.empty() && upper_bounds.back() == std::numeric_limits<double>::infinity()) {
    upper_bounds.pop_back();  // +Inf is always there
  }
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!std::isfinite(upper_bounds[i]) || (i > 0 && !(upper_bounds[i - 1] < upper_bounds[i]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram \"", name, "\": bucket bounds must be finite and strictly increasing"));
    }
  }
  return Register<HistogramFamily>(
      name, help,
      [&upper_bounds](const HistogramFamily& h) { return h.upper_bounds() == upper_bounds; },
      upper_bounds);
}

absl::Status Metrics::GaugeCallback(absl::string_view name, absl::string_view help,
                                    GaugeCallbackFamily::Callback callback) {
  if (!callback) {
    return absl::InvalidArgumentError(absl::StrCat("gauge \"", name, "\": no callback"));
  }
  return Register<GaugeCallbackFamily>(
             name, help, [](const GaugeCallbackFamily&) { return false; }, std::move(callback))
      .status();
}

std::string Metrics::Render() const {
  // Collect the families and let go of the registry lock before rendering:
  // callbacks may take other locks, or even register metrics.
  std::vector<const metrics_internal::Family*> families;
  {
    absl::MutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  std::string out;
  for (const auto* family : families) family->Render(out);
  return out;
}

}  // namespace warden
