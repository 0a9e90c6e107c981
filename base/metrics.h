// A small thread-safe Prometheus registry: counters, gauges and fixed-bucket
// histograms keyed by label sets, rendered in the text exposition format 0.0.4.
#ifndef RACKGATE_BASE_METRICS_H_
#define RACKGATE_BASE_METRICS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rackgate {

// Label name -> value. Names are sorted by the map, so the same set of
// labels names one series whatever order the caller wrote them in.
using MetricLabels = std::map<std::string, std::string>;

// A family's type, for Declare and Touch.
enum class MetricType { kCounter = 0, kGauge = 1, kHistogram = 2 };

// The Content-Type of Render()'s output.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// Families are created on first use, by name. A family's type, help text,
// label names and (for histograms) buckets are fixed by its first use; a
// later call that disagrees on type or label names is a bug and throws
// std::invalid_argument, as do invalid metric or label names. Label values are
// free text (escaped on output): keep them to a small, bounded set, never
// client-controlled strings, or the registry grows without bound.
//
// Thread-safe: every method may be called from any thread.
class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Default histogram buckets (seconds): Prometheus client defaults.
  static const std::vector<double>& DefaultBuckets();

  // Adds `by` (>= 0; a negative value is a bug and throws) to a counter.
  void CounterInc(const std::string& name, const std::string& help, const MetricLabels& labels,
                  double by = 1);
  void GaugeSet(const std::string& name, const std::string& help, const MetricLabels& labels,
                double value);
  void GaugeAdd(const std::string& name, const std::string& help, const MetricLabels& labels,
                double delta);
  // Declares a histogram's upper bounds (strictly increasing, finite; +Inf
  // is implicit) before its first observation; without it, the first
  // HistogramObserve uses DefaultBuckets(). Declaring a histogram again with
  // other buckets throws. The family appears in Render() once observed.
  void DefineHistogram(const std::string& name, const std::string& help,
                       std::vector<double> buckets);
  void HistogramObserve(const std::string& name, const std::string& help,
                        const MetricLabels& labels, double value);

  // Makes a family known before its first series, so that a scrape right
  // after start-up names it (HELP and TYPE, no sample) and a later use with
  // other label names or another type throws. For families whose label
  // values are only known when something happens (an HTTP status).
  void Declare(const std::string& name, const std::string& help, MetricType type,
               const std::vector<std::string>& label_names);
  // Creates the series at zero (a histogram with every bucket at 0) when it
  // does not exist yet; an existing series keeps its value. For series whose
  // label values are known at start-up, so that alerts see a 0, not nothing.
  void Touch(const std::string& name, const std::string& help, MetricType type,
             const MetricLabels& labels);

  // The text exposition format 0.0.4: families sorted by name, each with
  // HELP and TYPE lines, series sorted by label values. A declared family
  // with no series yet has its HELP and TYPE lines only.
  std::string Render() const;

 private:
  struct Family;
  Family& Get(const std::string& name, const std::string& help, int type,
              const MetricLabels& labels);

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_;
  std::map<std::string, std::vector<double>> declared_buckets_;  // DefineHistogram, not yet used
};

}  // namespace rackgate

#endif  // RACKGATE_BASE_METRICS_H_
