#include "awa/metrics.hpp"

#include <gtest/gtest.h>

#include <barrier>
#include <thread>
#include <vector>

#include "awa/error.hpp"

namespace awa::metrics {
namespace {

TEST(MetricsTest, CounterExpositionEscapesLabelValues) {
  Registry r;
  auto& c = r.counter("awa_test_total", "A test counter.\nSecond line with \\ and \"quotes\".",
                      {"queue", "awa_enqueue_shard"});
  c.with({"q\"1\\x\ny", "3"}).inc(2);
  c.with({"plain", "0"}).inc();
  EXPECT_EQ(r.expose(),
            "# HELP awa_test_total A test counter.\\nSecond line with \\\\ and \"quotes\".\n"
            "# TYPE awa_test_total counter\n"
            "awa_test_total{queue=\"plain\",awa_enqueue_shard=\"0\"} 1\n"
            "awa_test_total{queue=\"q\\\"1\\\\x\\ny\",awa_enqueue_shard=\"3\"} 2\n");
}

TEST(MetricsTest, UnlabelledMetricsShowZeroBeforeFirstUpdate) {
  Registry r;
  r.counter("c_total", "c");
  r.gauge("g", "g").with({}).set(-1.5);
  EXPECT_EQ(r.expose(),
            "# HELP c_total c\n# TYPE c_total counter\nc_total 0\n"
            "# HELP g g\n# TYPE g gauge\ng -1.5\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  const double bounds[] = {0.0005, 0.01, 1.0};
  auto& h = r.histogram("lat_seconds", "Latency.", {"queue"}, bounds);
  auto& q = h.with({"a"});
  q.observe(0.0001);
  q.observe(0.0005);  // on a bound: le is inclusive
  q.observe(0.25);
  q.observe(7.0);  // only in +Inf
  EXPECT_EQ(r.expose(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{queue=\"a\",le=\"0.0005\"} 2\n"
            "lat_seconds_bucket{queue=\"a\",le=\"0.01\"} 2\n"
            "lat_seconds_bucket{queue=\"a\",le=\"1\"} 3\n"
            "lat_seconds_bucket{queue=\"a\",le=\"+Inf\"} 4\n"
            "lat_seconds_sum{queue=\"a\"} 7.2506\n"
            "lat_seconds_count{queue=\"a\"} 4\n");
}

TEST(MetricsTest, UnlabelledHistogramHasOnlyLeLabel) {
  Registry r;
  const double bounds[] = {1.0};
  r.histogram("h", "h", {}, bounds).with({}).observe(2.0);
  EXPECT_EQ(r.expose(),
            "# HELP h h\n# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\nh_sum 2\nh_count 1\n");
}

TEST(MetricsTest, ConcurrentIncrementsAreExact) {
  Registry r;
  auto& family = r.counter("hits_total", "hits", {"queue"});
  auto& hist = r.histogram("obs_seconds", "obs", {"queue"});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100000;
  // Every thread starts together and also looks the series up itself, so series creation
  // races too.
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      auto& c = family.with({"shared"});
      auto& h = hist.with({"shared"});
      for (int i = 0; i < kPerThread; ++i) {
        c.inc();
        h.observe(0.001);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(family.with({"shared"}).value(), std::uint64_t{kThreads} * kPerThread);
  const auto snap = hist.with({"shared"}).snapshot();
  EXPECT_EQ(snap.count, std::uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(snap.cumulative.front(), 0u);  // 0.001 > 0.0005
  EXPECT_EQ(snap.cumulative[1], std::uint64_t{kThreads} * kPerThread);
}

TEST(MetricsTest, ReRegisteringReturnsTheSameFamilyOrThrows) {
  Registry r;
  auto& a = r.counter("x_total", "x", {"queue"});
  EXPECT_EQ(&a, &r.counter("x_total", "x", {"queue"}));
  EXPECT_THROW(r.counter("x_total", "x", {"other"}), InvalidArgument);
  EXPECT_THROW(r.gauge("x_total", "x", {"queue"}), InvalidArgument);
  const double b1[] = {1.0};
  const double b2[] = {2.0};
  r.histogram("y", "y", {}, b1);
  EXPECT_THROW(r.histogram("y", "y", {}, b2), InvalidArgument);
}

TEST(MetricsTest, RejectsNamesPrometheusWouldReject) {
  Registry r;
  EXPECT_THROW(r.counter("1bad", "x"), InvalidArgument);
  EXPECT_THROW(r.counter("bad-name", "x"), InvalidArgument);
  EXPECT_THROW(r.counter("ok", "x", {"__reserved"}), InvalidArgument);
  EXPECT_THROW(r.counter("ok2", "x", {"a", "a"}), InvalidArgument);
  EXPECT_THROW(r.histogram("h", "x", {"le"}), InvalidArgument);
  const double unsorted[] = {2.0, 1.0};
  EXPECT_THROW(r.histogram("h2", "x", {}, unsorted), InvalidArgument);
  EXPECT_EQ(r.expose(), "");
}

TEST(MetricsTest, WrongLabelArityThrows) {
  Registry r;
  auto& c = r.counter("z_total", "z", {"queue", "state"});
  EXPECT_THROW(c.with({"only-one"}), InvalidArgument);
}

TEST(MetricsTest, EngineFamiliesAreRegisteredInTheDefaultRegistry) {
  auto& m = engine();
  m.job_claimed.with({"metrics_unit_queue", "2"}).inc(5);
  const auto text = default_registry().expose();
  EXPECT_NE(text.find("# TYPE awa_job_claimed_total counter\n"), std::string::npos);
  EXPECT_NE(
      text.find("awa_job_claimed_total{queue=\"metrics_unit_queue\",awa_enqueue_shard=\"2\"} 5\n"),
      std::string::npos);
  EXPECT_NE(text.find("# TYPE awa_claim_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("awa_completion_flush_seconds_count 0\n"), std::string::npos);
}

}  // namespace
}  // namespace awa::metrics
