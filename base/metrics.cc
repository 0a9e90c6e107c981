// A small thread-safe Prometheus registry (text exposition format 0.0.4).
#include "base/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <system_error>

namespace rackgate {

namespace {

enum Type { kCounter = 0, kGauge = 1, kHistogram = 2 };

const char* TypeName(int type) {
  switch (type) {
    case kCounter:
      return "counter";
    case kGauge:
      return "gauge";
    default:
      return "histogram";
  }
}

bool IsNameChar(char c, bool first, bool colon_ok) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon_ok && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

// [a-zA-Z_:][a-zA-Z0-9_:]* for metrics, [a-zA-Z_][a-zA-Z0-9_]* for labels.
bool ValidName(const std::string& name, bool metric) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], i == 0, metric)) return false;
  }
  // Label names starting with "__" are reserved for Prometheus itself.
  return metric || name.compare(0, 2, "__") != 0;
}

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

// Label values escape backslash, double quote and line feed.
void AppendLabelValue(const std::string& v, std::string* out) {
  for (char c : v) {
    switch (c) {
      case '\\':
        *out += "\\\\";
        break;
      case '"':
        *out += "\\\"";
        break;
      case '\n':
        *out += "\\n";
        break;
      default:
        *out += c;
    }
  }
}

// HELP text escapes backslash and line feed.
void AppendHelp(const std::string& v, std::string* out) {
  for (char c : v) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '\n') {
      *out += "\\n";
    } else {
      *out += c;
    }
  }
}

// {a="x",b="y"} plus an optional extra label (histogram `le`); nothing when
// there are no labels at all.
std::string LabelBlock(const std::vector<std::string>& names, const std::vector<std::string>& values,
                       const std::string& extra_name = "", const std::string& extra_value = "") {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    AppendLabelValue(values[i], &out);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    AppendLabelValue(extra_value, &out);
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace

struct Metrics::Family {
  struct Series {
    double value = 0;
    std::vector<uint64_t> bucket_counts;  // histograms: per bucket, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };

  int type = kCounter;
  std::string help;
  std::vector<std::string> label_names;
  std::vector<double> buckets;
  std::map<std::vector<std::string>, Series> series;

  Series& At(const MetricLabels& labels) {
    std::vector<std::string> values;
    values.reserve(labels.size());
    for (const auto& [unused, v] : labels) values.push_back(v);
    auto [it, inserted] = series.try_emplace(std::move(values));
    if (inserted && type == kHistogram) it->second.bucket_counts.assign(buckets.size(), 0);
    return it->second;
  }
};

Metrics::Metrics() = default;
Metrics::~Metrics() = default;

const std::vector<double>& Metrics::DefaultBuckets() {
  static const std::vector<double> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5,   1,    2.5,   5,    10};
  return kBuckets;
}

Metrics::Family& Metrics::Get(const std::string& name, const std::string& help, int type,
                              const MetricLabels& labels) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    if (!ValidName(name, true)) throw std::invalid_argument("invalid metric name: " + name);
    auto family = std::make_unique<Family>();
    family->type = type;
    family->help = help;
    for (const auto& [label, unused] : labels) {
      if (!ValidName(label, false) || (type == kHistogram && label == "le")) {
        throw std::invalid_argument("invalid label name " + label + " on " + name);
      }
      family->label_names.push_back(label);
    }
    if (type == kHistogram) {
      auto declared = declared_buckets_.find(name);
      family->buckets = declared != declared_buckets_.end() ? declared->second : DefaultBuckets();
    }
    it = families_.emplace(name, std::move(family)).first;
  }
  Family& f = *it->second;
  if (f.type != type) {
    throw std::invalid_argument("metric " + name + " is a " + TypeName(f.type) + ", not a " +
                                TypeName(type));
  }
  bool same = f.label_names.size() == labels.size();
  if (same) {
    size_t i = 0;
    for (const auto& [label, unused] : labels) same = same && f.label_names[i++] == label;
  }
  if (!same) throw std::invalid_argument("metric " + name + " used with other label names");
  return f;
}

void Metrics::CounterInc(const std::string& name, const std::string& help,
                         const MetricLabels& labels, double by) {
  if (!(by >= 0)) throw std::invalid_argument("counter " + name + " decremented");
  std::lock_guard lock(mu_);
  Get(name, help, kCounter, labels).At(labels).value += by;
}

void Metrics::GaugeSet(const std::string& name, const std::string& help,
                       const MetricLabels& labels, double value) {
  std::lock_guard lock(mu_);
  Get(name, help, kGauge, labels).At(labels).value = value;
}

void Metrics::GaugeAdd(const std::string& name, const std::string& help,
                       const MetricLabels& labels, double delta) {
  std::lock_guard lock(mu_);
  Get(name, help, kGauge, labels).At(labels).value += delta;
}

void Metrics::Declare(const std::string& name, const std::string& help, MetricType type,
                      const std::vector<std::string>& label_names) {
  MetricLabels labels;
  for (const auto& label : label_names) labels[label];
  if (labels.size() != label_names.size()) throw std::invalid_argument("repeated label name on " + name);
  std::lock_guard lock(mu_);
  Get(name, help, static_cast<int>(type), labels);
}

void Metrics::Touch(const std::string& name, const std::string& help, MetricType type,
                    const MetricLabels& labels) {
  std::lock_guard lock(mu_);
  Get(name, help, static_cast<int>(type), labels).At(labels);
}

void Metrics::DefineHistogram(const std::string& name, const std::string& help,
                              std::vector<double> buckets) {
  (void)help;  // the first observation's help text names the family
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (!std::isfinite(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1]))) {
      throw std::invalid_argument("histogram " + name + ": buckets must be finite and increasing");
    }
  }
  if (!ValidName(name, true)) throw std::invalid_argument("invalid metric name: " + name);
  std::lock_guard lock(mu_);
  auto family = families_.find(name);
  if (family != families_.end()) {
    if (family->second->type != kHistogram || family->second->buckets != buckets) {
      throw std::invalid_argument("histogram " + name + " already in use with other buckets");
    }
    return;
  }
  auto [it, inserted] = declared_buckets_.try_emplace(name, buckets);
  if (!inserted && it->second != buckets) {
    throw std::invalid_argument("histogram " + name + " already defined with other buckets");
  }
}

void Metrics::HistogramObserve(const std::string& name, const std::string& help,
                               const MetricLabels& labels, double value) {
  std::lock_guard lock(mu_);
  Family& f = Get(name, help, kHistogram, labels);
  Family::Series& s = f.At(labels);
  for (size_t i = 0; i < f.buckets.size(); ++i) {
    if (value <= f.buckets[i]) {
      ++s.bucket_counts[i];
      break;
    }
  }
  ++s.count;
  s.sum += value;
}

std::string Metrics::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + ' ';
    AppendHelp(f->help, &out);
    out += "\n# TYPE " + name + ' ' + TypeName(f->type) + '\n';
    for (const auto& [values, s] : f->series) {
      if (f->type != kHistogram) {
        out += name + LabelBlock(f->label_names, values) + ' ' + FormatNumber(s.value) + '\n';
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f->buckets.size(); ++i) {
        cumulative += s.bucket_counts[i];
        out += name + "_bucket" +
               LabelBlock(f->label_names, values, "le", FormatNumber(f->buckets[i])) + ' ' +
               std::to_string(cumulative) + '\n';
      }
      out += name + "_bucket" + LabelBlock(f->label_names, values, "le", "+Inf") + ' ' +
             std::to_string(s.count) + '\n';
      out += name + "_sum" + LabelBlock(f->label_names, values) + ' ' + FormatNumber(s.sum) + '\n';
      out += name + "_count" + LabelBlock(f->label_names, values) + ' ' + std::to_string(s.count) +
             '\n';
    }
  }
  return out;
}

}  // namespace rackgate
