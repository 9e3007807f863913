// Metrics: exact text-format 0.0.4 output, registration rules, and exact
// totals under concurrent use.
#include "common/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MetricsTest, RendersCounterSeriesInLabelOrder) {
  Metrics metrics;
  auto runs = metrics.Counter("warden_runs_total", "Executions finished.");
  ASSERT_TRUE(runs.ok()) << runs.status();
  (*runs)->Add({{"outcome", "ok"}, {"language", "python"}});
  (*runs)->Add({{"language", "python"}, {"outcome", "ok"}}, 2);
  (*runs)->Add({{"language", "bash"}, {"outcome", "timeout"}});

  EXPECT_EQ(metrics.Render(),
            "# HELP warden_runs_total Executions finished.\n"
            "# TYPE warden_runs_total counter\n"
            "warden_runs_total{language=\"bash\",outcome=\"timeout\"} 1\n"
            "warden_runs_total{language=\"python\",outcome=\"ok\"} 3\n");
  EXPECT_EQ((*runs)->Value({{"language", "python"}, {"outcome", "ok"}}), 3);
  EXPECT_EQ((*runs)->Value({{"language", "ruby"}}), 0);
}

TEST(MetricsTest, RendersUnlabelledSeriesWithoutBraces) {
  Metrics metrics;
  auto c = metrics.Counter("c_total", "A counter.");
  ASSERT_TRUE(c.ok());
  (*c)->Add({});
  EXPECT_EQ(metrics.Render(),
            "# HELP c_total A counter.\n"
            "# TYPE c_total counter\n"
            "c_total 1\n");
}

TEST(MetricsTest, CounterIgnoresNegativeAndNaNIncrements) {
  Metrics metrics;
  auto c = metrics.Counter("c_total", "A counter.");
  ASSERT_TRUE(c.ok());
  (*c)->Add({}, 5);
  (*c)->Add({}, -1);
  (*c)->Add({}, std::nan(""));
  EXPECT_EQ((*c)->Value({}), 5);
}

TEST(MetricsTest, RendersGaugeAfterSetAndAdd) {
  Metrics metrics;
  auto g = metrics.Gauge("warden_queue_depth", "One-shot requests waiting.");
  ASSERT_TRUE(g.ok());
  (*g)->Set({{"language", "python"}}, 7);
  (*g)->Add({{"language", "python"}}, -2.5);
  (*g)->Add({{"language", "bash"}}, 1);
  EXPECT_EQ(metrics.Render(),
            "# HELP warden_queue_depth One-shot requests waiting.\n"
            "# TYPE warden_queue_depth gauge\n"
            "warden_queue_depth{language=\"bash\"} 1\n"
            "warden_queue_depth{language=\"python\"} 4.5\n");
}

TEST(MetricsTest, RendersHistogramBucketsCumulativelyWithSumAndCount) {
  Metrics metrics;
  auto h = metrics.Histogram("warden_run_seconds", "Wall time of executions.", {0.1, 1, 10});
  ASSERT_TRUE(h.ok()) << h.status();
  (*h)->Observe({{"language", "python"}}, 0.05);
  (*h)->Observe({{"language", "python"}}, 0.1);  // le is inclusive
  (*h)->Observe({{"language", "python"}}, 5);
  (*h)->Observe({{"language", "python"}}, 60);
  (*h)->Observe({}, 0.5);

  EXPECT_EQ(metrics.Render(),
            "# HELP warden_run_seconds Wall time of executions.\n"
            "# TYPE warden_run_seconds histogram\n"
            "warden_run_seconds_bucket{le=\"0.1\"} 0\n"
            "warden_run_seconds_bucket{le=\"1\"} 1\n"
            "warden_run_seconds_bucket{le=\"10\"} 1\n"
            "warden_run_seconds_bucket{le=\"+Inf\"} 1\n"
            "warden_run_seconds_sum 0.5\n"
            "warden_run_seconds_count 1\n"
            "warden_run_seconds_bucket{language=\"python\",le=\"0.1\"} 2\n"
            "warden_run_seconds_bucket{language=\"python\",le=\"1\"} 2\n"
            "warden_run_seconds_bucket{language=\"python\",le=\"10\"} 3\n"
            "warden_run_seconds_bucket{language=\"python\",le=\"+Inf\"} 4\n"
            "warden_run_seconds_sum{language=\"python\"} 65.15\n"
            "warden_run_seconds_count{language=\"python\"} 4\n");
  EXPECT_EQ((*h)->Count({{"language", "python"}}), 4u);
}

TEST(MetricsTest, HistogramIgnoresNaNAndDropsUserLeLabel) {
  Metrics metrics;
  auto h = metrics.Histogram("h", "H.", {1});
  ASSERT_TRUE(h.ok());
  (*h)->Observe({{"le", "x"}, {"a", "b"}}, std::nan(""));
  EXPECT_EQ((*h)->Count({{"le", "x"}, {"a", "b"}}), 0u);
  (*h)->Observe({{"le", "x"}, {"a", "b"}}, 2);
  EXPECT_EQ(metrics.Render(),
            "# HELP h H.\n"
            "# TYPE h histogram\n"
            "h_bucket{a=\"b\",le=\"1\"} 0\n"
            "h_bucket{a=\"b\",le=\"+Inf\"} 1\n"
            "h_sum{a=\"b\"} 2\n"
            "h_count{a=\"b\"} 1\n");
}

TEST(MetricsTest, EscapesLabelValuesAndHelpText) {
  Metrics metrics;
  auto c = metrics.Counter("c_total", "Help with \\ backslash\nand \"quotes\".");
  ASSERT_TRUE(c.ok());
  (*c)->Add({{"path", "C:\\dir \"x\"\nnext"}});
  EXPECT_EQ(metrics.Render(),
            "# HELP c_total Help with \\\\ backslash\\nand \"quotes\".\n"
            "# TYPE c_total counter\n"
            "c_total{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
}

TEST(MetricsTest, RendersInvalidLabelNamesWithUnderscores) {
  Metrics metrics;
  auto c = metrics.Counter("c_total", "C.");
  ASSERT_TRUE(c.ok());
  (*c)->Add({{"tenant-id", "a"}, {"0day", "b"}});
  EXPECT_THAT(metrics.Render(), HasSubstr("c_total{_0day=\"b\",tenant_id=\"a\"} 1\n"));
}

TEST(MetricsTest, RendersSpecialAndLargeValues) {
  Metrics metrics;
  auto g = metrics.Gauge("g", "G.");
  ASSERT_TRUE(g.ok());
  (*g)->Set({{"v", "a_nan"}}, std::nan(""));
  (*g)->Set({{"v", "b_inf"}}, std::numeric_limits<double>::infinity());
  (*g)->Set({{"v", "c_neginf"}}, -std::numeric_limits<double>::infinity());
  (*g)->Set({{"v", "d_million"}}, 1e6);
  (*g)->Set({{"v", "e_tenth"}}, 0.1);
  (*g)->Set({{"v", "f_huge"}}, 1e300);
  (*g)->Set({{"v", "g_negative"}}, -42);
  EXPECT_EQ(metrics.Render(),
            "# HELP g G.\n"
            "# TYPE g gauge\n"
            "g{v=\"a_nan\"} NaN\n"
            "g{v=\"b_inf\"} +Inf\n"
            "g{v=\"c_neginf\"} -Inf\n"
            "g{v=\"d_million\"} 1000000\n"
            "g{v=\"e_tenth\"} 0.1\n"
            "g{v=\"f_huge\"} 1e+300\n"
            "g{v=\"g_negative\"} -42\n");
}

TEST(MetricsTest, RendersFamiliesInNameOrderWithHelpAndTypeOnce) {
  Metrics metrics;
  auto b = metrics.Gauge("b_gauge", "B.");
  auto a = metrics.Counter("a_total", "A.");
  ASSERT_TRUE(a.ok() && b.ok());
  (*b)->Set({{"x", "1"}}, 1);
  (*b)->Set({{"x", "2"}}, 2);
  (*a)->Add({});
  EXPECT_EQ(metrics.Render(),
            "# HELP a_total A.\n"
            "# TYPE a_total counter\n"
            "a_total 1\n"
            "# HELP b_gauge B.\n"
            "# TYPE b_gauge gauge\n"
            "b_gauge{x=\"1\"} 1\n"
            "b_gauge{x=\"2\"} 2\n");
}

TEST(MetricsTest, RendersFamilyWithNoSeriesAsHelpAndTypeOnly) {
  Metrics metrics;
  ASSERT_TRUE(metrics.Counter("c_total", "C.").ok());
  EXPECT_EQ(metrics.Render(), "# HELP c_total C.\n# TYPE c_total counter\n");
}

TEST(MetricsTest, EvaluatesGaugeCallbackAtScrapeTimeSortedAndDeduplicated) {
  Metrics metrics;
  int live = 1;
  ASSERT_TRUE(metrics
                  .GaugeCallback("warden_pool_ready", "Ready workers per pool.",
                                 [&live] {
                                   return GaugeCallbackFamily::Samples{
                                       {{{"language", "python"}}, double(live)},
                                       {{{"language", "bash"}}, 0},
                                       {{{"language", "python"}}, double(live + 1)},
                                   };
                                 })
                  .ok());
  EXPECT_EQ(metrics.Render(),
            "# HELP warden_pool_ready Ready workers per pool.\n"
            "# TYPE warden_pool_ready gauge\n"
            "warden_pool_ready{language=\"bash\"} 0\n"
            "warden_pool_ready{language=\"python\"} 2\n");
  live = 5;
  EXPECT_THAT(metrics.Render(), HasSubstr("warden_pool_ready{language=\"python\"} 6\n"));
}

TEST(MetricsTest, GaugeCallbackMayUseTheRegistryWithoutDeadlock) {
  Metrics metrics;
  ASSERT_TRUE(metrics
                  .GaugeCallback("cb", "CB.",
                                 [&metrics] {
                                   auto c = metrics.Counter("from_callback_total", "X.");
                                   if (c.ok()) (*c)->Add({});
                                   return GaugeCallbackFamily::Samples{{{}, 1}};
                                 })
                  .ok());
  EXPECT_THAT(metrics.Render(), HasSubstr("cb 1\n"));
  // Registered during the first scrape, so it shows from the second one on.
  EXPECT_THAT(metrics.Render(), HasSubstr("from_callback_total 2\n"));
}

TEST(MetricsTest, RegisteringTheSameFamilyAgainReturnsIt) {
  Metrics metrics;
  auto first = metrics.Counter("c_total", "C.");
  auto second = metrics.Counter("c_total", "C.");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);

  auto h1 = metrics.Histogram("h", "H.", {1, 2});
  auto h2 = metrics.Histogram("h", "H.", {1, 2});
  ASSERT_TRUE(h1.ok() && h2.ok());
  EXPECT_EQ(*h1, *h2);
}

TEST(MetricsTest, RefusesATakenNameWithAnotherTypeHelpOrBuckets) {
  Metrics metrics;
  ASSERT_TRUE(metrics.Counter("x", "X.").ok());
  EXPECT_EQ(metrics.Gauge("x", "X.").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(metrics.Counter("x", "Other help.").status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(metrics.Histogram("h", "H.", {1, 2}).ok());
  EXPECT_EQ(metrics.Histogram("h", "H.", {1, 3}).status().code(), absl::StatusCode::kAlreadyExists);
  auto cb = [] { return GaugeCallbackFamily::Samples{}; };
  ASSERT_TRUE(metrics.GaugeCallback("cb", "CB.", cb).ok());
  EXPECT_EQ(metrics.GaugeCallback("cb", "CB.", cb).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(metrics.Gauge("cb", "CB.").status().message(),
              HasSubstr("already registered as a gauge"));
}

TEST(MetricsTest, RejectsInvalidMetricNames) {
  Metrics metrics;
  for (const char* name : {"", "0abc", "has-dash", "has space", "ünicode"}) {
    EXPECT_EQ(metrics.Counter(name, "X.").status().code(), absl::StatusCode::kInvalidArgument)
        << name;
  }
  EXPECT_TRUE(metrics.Counter("ns:sub_name_total", "X.").ok());
  EXPECT_EQ(metrics.GaugeCallback("cb", "X.", nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MetricsTest, RejectsUnsortedOrNonFiniteBuckets) {
  Metrics metrics;
  EXPECT_EQ(metrics.Histogram("h1", "H.", {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metrics.Histogram("h2", "H.", {2, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metrics.Histogram("h3", "H.", {std::nan(""), 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsTest, AcceptsAnExplicitInfBucketAsTheImplicitOne) {
  Metrics metrics;
  auto h = metrics.Histogram("h", "H.", {1, std::numeric_limits<double>::infinity()});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT((*h)->upper_bounds(), ElementsAre(1));
}

TEST(MetricsTest, ExponentialBucketsMultiplyFromStart) {
  EXPECT_THAT(ExponentialBuckets(0.5, 2, 4), ElementsAre(0.5, 1, 2, 4));
  EXPECT_TRUE(ExponentialBuckets(0, 2, 4).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 1, 4).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 2, 0).empty());
}

TEST(MetricsTest, ConcurrentUpdatesAddUpExactly) {
  Metrics metrics;
  auto c = metrics.Counter("c_total", "C.");
  auto g = metrics.Gauge("g", "G.");
  auto h = metrics.Histogram("h", "H.", {10, 100});
  ASSERT_TRUE(c.ok() && g.ok() && h.ok());

  constexpr int kThreads = 8;
  constexpr int kIterations = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const MetricLabels mine = {{"thread", absl::StrCat(t % 2)}};
      for (int i = 0; i < kIterations; ++i) {
        (*c)->Add(mine);
        (*c)->Add({});
        (*g)->Add({}, 1);
        (*g)->Add({}, -1);
        (*h)->Observe(mine, i % 200);  // 11 of every 200 are <= 10, 101 are <= 100
      }
    });
  }
  // Scrape while the writers run: must not crash, deadlock or tear a line.
  for (int i = 0; i < 20; ++i) {
    const std::string text = metrics.Render();
    EXPECT_EQ(text.back(), '\n');
  }
  for (auto& t : threads) t.join();

  EXPECT_EQ((*c)->Value({}), kThreads * kIterations);
  EXPECT_EQ((*c)->Value({{"thread", "0"}}), kThreads / 2 * kIterations);
  EXPECT_EQ((*c)->Value({{"thread", "1"}}), kThreads / 2 * kIterations);
  EXPECT_EQ((*g)->Value({}), 0);
  const int per_label = kThreads / 2 * kIterations;
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr(absl::StrCat("h_bucket{thread=\"0\",le=\"10\"} ",
                                           per_label / 200 * 11, "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("h_bucket{thread=\"0\",le=\"100\"} ",
                                           per_label / 200 * 101, "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("h_count{thread=\"1\"} ", per_label, "\n")));
  // Sum of 0..199 is 19900, per 200 observations; exact in a double.
  EXPECT_THAT(text, HasSubstr(absl::StrCat("h_sum{thread=\"1\"} ", per_label / 200 * 19900, "\n")));
}

}  // namespace
}  // namespace warden
