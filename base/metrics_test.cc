#include "base/metrics.h"

#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace rackgate {
namespace {

TEST(Metrics, EmptyRendersNothing) {
  Metrics m;
  EXPECT_EQ(m.Render(), "");
}

TEST(Metrics, CounterWithLabelsSortedAndEscaped) {
  Metrics m;
  m.CounterInc("http_requests_total", "Requests.\nBy route \\ status.",
               {{"status", "200"}, {"route", "GET /a"}});
  m.CounterInc("http_requests_total", "ignored", {{"route", "GET /a"}, {"status", "200"}}, 2);
  m.CounterInc("http_requests_total", "", {{"route", "we\"ird\\\nvalue"}, {"status", "500"}});
  EXPECT_EQ(m.Render(),
            "# HELP http_requests_total Requests.\\nBy route \\\\ status.\n"
            "# TYPE http_requests_total counter\n"
            "http_requests_total{route=\"GET /a\",status=\"200\"} 3\n"
            "http_requests_total{route=\"we\\\"ird\\\\\\nvalue\",status=\"500\"} 1\n");
}

TEST(Metrics, GaugeSetAddNoLabels) {
  Metrics m;
  m.GaugeAdd("sessions", "Open sessions.", {}, 1);
  m.GaugeAdd("sessions", "Open sessions.", {}, 1);
  m.GaugeAdd("sessions", "Open sessions.", {}, -0.5);
  m.GaugeSet("temp", "T.", {{"k", "v"}}, -2.25);
  EXPECT_EQ(m.Render(),
            "# HELP sessions Open sessions.\n# TYPE sessions gauge\nsessions 1.5\n"
            "# HELP temp T.\n# TYPE temp gauge\ntemp{k=\"v\"} -2.25\n");
}

TEST(Metrics, HistogramCumulativeBuckets) {
  Metrics m;
  m.DefineHistogram("d_seconds", "Durations.", {0.1, 1});
  m.HistogramObserve("d_seconds", "Durations.", {{"route", "r"}}, 0.05);
  m.HistogramObserve("d_seconds", "Durations.", {{"route", "r"}}, 0.1);
  m.HistogramObserve("d_seconds", "Durations.", {{"route", "r"}}, 0.5);
  m.HistogramObserve("d_seconds", "Durations.", {{"route", "r"}}, 7);
  EXPECT_EQ(m.Render(),
            "# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{route=\"r\",le=\"0.1\"} 2\n"
            "d_seconds_bucket{route=\"r\",le=\"1\"} 3\n"
            "d_seconds_bucket{route=\"r\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{route=\"r\"} 7.65\n"
            "d_seconds_count{route=\"r\"} 4\n");
}

TEST(Metrics, HistogramDefaultBucketsNoLabels) {
  Metrics m;
  m.HistogramObserve("h", "H.", {}, 0.003);
  const std::string out = m.Render();
  EXPECT_NE(out.find("h_bucket{le=\"0.005\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("h_bucket{le=\"10\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("h_bucket{le=\"+Inf\"} 1\nh_sum 0.003\nh_count 1\n"), std::string::npos)
      << out;
}

TEST(Metrics, MisuseThrows) {
  Metrics m;
  m.CounterInc("c", "C.", {{"a", "1"}});
  EXPECT_THROW(m.GaugeSet("c", "C.", {{"a", "1"}}, 1), std::invalid_argument);
  EXPECT_THROW(m.CounterInc("c", "C.", {{"b", "1"}}), std::invalid_argument);
  EXPECT_THROW(m.CounterInc("c", "C.", {}), std::invalid_argument);
  EXPECT_THROW(m.CounterInc("c", "C.", {{"a", "1"}}, -1), std::invalid_argument);
  EXPECT_THROW(m.CounterInc("1bad", "", {}), std::invalid_argument);
  EXPECT_THROW(m.CounterInc("bad-name", "", {}), std::invalid_argument);
  EXPECT_THROW(m.CounterInc("ok", "", {{"__reserved", "x"}}), std::invalid_argument);
  EXPECT_THROW(m.HistogramObserve("h", "", {{"le", "x"}}, 1), std::invalid_argument);
  EXPECT_THROW(m.DefineHistogram("h2", "", {1, 1}), std::invalid_argument);
  m.DefineHistogram("h3", "", {1, 2});
  m.DefineHistogram("h3", "", {1, 2});
  EXPECT_THROW(m.DefineHistogram("h3", "", {1, 3}), std::invalid_argument);
  m.HistogramObserve("h4", "", {}, 1);
  EXPECT_THROW(m.DefineHistogram("h4", "", {1, 3}), std::invalid_argument);
}

TEST(Metrics, DeclaredFamilyRendersHelpAndTypeOnly) {
  Metrics m;
  m.Declare("req_total", "Requests.", MetricType::kCounter, {"status", "method"});
  EXPECT_EQ(m.Render(), "# HELP req_total Requests.\n# TYPE req_total counter\n");
  // The declared label names bind: the order given does not matter, others throw.
  m.CounterInc("req_total", "Requests.", {{"method", "GET"}, {"status", "200"}});
  EXPECT_THROW(m.CounterInc("req_total", "Requests.", {{"method", "GET"}}), std::invalid_argument);
  EXPECT_THROW(m.GaugeSet("req_total", "Requests.", {{"method", "GET"}, {"status", "200"}}, 1),
               std::invalid_argument);
  EXPECT_THROW(m.Declare("x", "", MetricType::kGauge, {"a", "a"}), std::invalid_argument);
  EXPECT_NE(m.Render().find("req_total{method=\"GET\",status=\"200\"} 1\n"), std::string::npos);
}

TEST(Metrics, TouchCreatesZeroSeriesAndKeepsValues) {
  Metrics m;
  m.DefineHistogram("d_seconds", "D.", {0.5, 1});
  m.Touch("d_seconds", "D.", MetricType::kHistogram, {{"route", "/x"}});
  m.Touch("up_total", "U.", MetricType::kCounter, {});
  m.CounterInc("up_total", "U.", {}, 3);
  m.Touch("up_total", "U.", MetricType::kCounter, {});
  m.Touch("g", "G.", MetricType::kGauge, {{"state", "joined"}});
  EXPECT_EQ(m.Render(),
            "# HELP d_seconds D.\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{route=\"/x\",le=\"0.5\"} 0\n"
            "d_seconds_bucket{route=\"/x\",le=\"1\"} 0\n"
            "d_seconds_bucket{route=\"/x\",le=\"+Inf\"} 0\n"
            "d_seconds_sum{route=\"/x\"} 0\nd_seconds_count{route=\"/x\"} 0\n"
            "# HELP g G.\n# TYPE g gauge\ng{state=\"joined\"} 0\n"
            "# HELP up_total U.\n# TYPE up_total counter\nup_total 3\n");
}

TEST(Metrics, ConcurrentIncrements) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m] {
      for (int i = 0; i < 10000; ++i) m.CounterInc("n_total", "N.", {{"k", "v"}});
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NE(m.Render().find("n_total{k=\"v\"} 40000\n"), std::string::npos);
}

}  // namespace
}  // namespace rackgate
